package avs

import (
	"errors"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
)

// Config configures the AVS client. Read it with envconfig.Process("APP", &cfg): the variables are
// APP_AVS_URL, APP_AVS_OAUTH_URL, APP_AVS_CLIENT_ID, ...
type Config struct {
	// URL is the base of the AVS API; the client calls <URL>/api/v2/evaluationmetadata.
	URL string `envconfig:"AVS_URL"`
	// OAuthURL is the OAuth2 token endpoint.
	OAuthURL string `envconfig:"AVS_OAUTH_URL"`
	// OAuthGrant is the token request's grant: password (the original broker's: the client ID,
	// with ClientSecret if any, in the Authorization header and OAuthUsername and OAuthPassword
	// in the form) or client_credentials.
	OAuthGrant    string `envconfig:"AVS_OAUTH_GRANT" default:"password"`
	OAuthUsername string `envconfig:"AVS_OAUTH_USERNAME"`
	OAuthPassword string `envconfig:"AVS_OAUTH_PASSWORD"`
	ClientID      string `envconfig:"AVS_CLIENT_ID"`
	ClientSecret  string `envconfig:"AVS_CLIENT_SECRET"`
	// ParentID is the parent evaluation internal evaluations are created under.
	ParentID int64 `envconfig:"AVS_PARENT_ID"`
	// InternalTesterAccessID and ExternalTesterAccessID are the tester access ids of internal and
	// external evaluations.
	InternalTesterAccessID int64 `envconfig:"AVS_INTERNAL_TESTER_ACCESS_ID"`
	ExternalTesterAccessID int64 `envconfig:"AVS_EXTERNAL_TESTER_ACCESS_ID"`
	// Timeout bounds one HTTP request (token requests included).
	Timeout time.Duration `envconfig:"AVS_TIMEOUT" default:"10s"`
	// Config is what every client shares: the call policy (APP_EXTERNAL_CALL_*), metrics, transport.
	clientkit.Config
	// RetryInitialBackoff and RetryMaxBackoff shape the exponential backoff between retries of
	// transient failures.
	RetryInitialBackoff time.Duration `envconfig:"AVS_RETRY_INITIAL_BACKOFF" default:"200ms"`
	RetryMaxBackoff     time.Duration `envconfig:"AVS_RETRY_MAX_BACKOFF" default:"10s"`
}

// The OAuth grants of OAuthGrant.
const (
	GrantPassword          = "password"
	GrantClientCredentials = "client_credentials"
)

func (c *Config) withDefaults() {
	if c.OAuthGrant == "" {
		c.OAuthGrant = GrantPassword
	}
	c.Timeout, c.RetryInitialBackoff, c.RetryMaxBackoff = clientkit.Defaults(c.Timeout, c.RetryInitialBackoff, c.RetryMaxBackoff)
}

// Validate reports missing or malformed settings.
func (c Config) Validate() error {
	errs := []error{clientkit.CheckURL("APP_AVS_URL", c.URL), clientkit.CheckURL("APP_AVS_OAUTH_URL", c.OAuthURL),
		clientkit.Require("APP_AVS_CLIENT_ID", c.ClientID)}
	switch c.OAuthGrant {
	case "", GrantPassword:
		errs = append(errs, clientkit.Require("APP_AVS_OAUTH_USERNAME", c.OAuthUsername), clientkit.Require("APP_AVS_OAUTH_PASSWORD", c.OAuthPassword))
	case GrantClientCredentials:
	default:
		errs = append(errs, fmt.Errorf("APP_AVS_OAUTH_GRANT must be %s or %s, not %q", GrantPassword, GrantClientCredentials, c.OAuthGrant))
	}
	return errors.Join(errs...)
}
