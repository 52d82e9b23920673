package director

import (
	"errors"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
)

// Config configures the Director client. Read it with envconfig.Process("APP", &cfg): the variables
// are APP_DIRECTOR_URL, APP_SKIP_DIRECTOR_CERT_VERIFICATION (the names and defaults the Runtime
// Provisioner's configuration reads too), APP_DIRECTOR_OAUTH_TOKEN_URL, APP_DIRECTOR_OAUTH_CLIENT_ID, ...
type Config struct {
	// URL is the Director's GraphQL endpoint.
	URL string `envconfig:"DIRECTOR_URL" default:"https://compass-gateway-auth-oauth.kyma.local/director/graphql"`
	// SkipCertVerify turns off TLS certificate verification of the Director and its token
	// endpoint, for development installations with self-signed certificates.
	SkipCertVerify bool `envconfig:"SKIP_DIRECTOR_CERT_VERIFICATION" default:"false"`
	// OAuthTokenURL is the OAuth2 token endpoint (client credentials grant).
	OAuthTokenURL     string `envconfig:"DIRECTOR_OAUTH_TOKEN_URL"`
	OAuthClientID     string `envconfig:"DIRECTOR_OAUTH_CLIENT_ID"`
	OAuthClientSecret string `envconfig:"DIRECTOR_OAUTH_CLIENT_SECRET"`
	// Timeout bounds one HTTP request (token requests included).
	Timeout time.Duration `envconfig:"DIRECTOR_TIMEOUT" default:"10s"`
	// Config is what every client shares: the call policy (APP_EXTERNAL_CALL_*), metrics, transport.
	clientkit.Config
	// RetryInitialBackoff and RetryMaxBackoff shape the exponential backoff between retries of
	// transient failures.
	RetryInitialBackoff time.Duration `envconfig:"DIRECTOR_RETRY_INITIAL_BACKOFF" default:"200ms"`
	RetryMaxBackoff     time.Duration `envconfig:"DIRECTOR_RETRY_MAX_BACKOFF" default:"10s"`
}

func (c *Config) withDefaults() {
	c.Timeout, c.RetryInitialBackoff, c.RetryMaxBackoff = clientkit.Defaults(c.Timeout, c.RetryInitialBackoff, c.RetryMaxBackoff)
}

// Validate reports missing or malformed settings.
func (c Config) Validate() error {
	return errors.Join(clientkit.CheckURL("APP_DIRECTOR_URL", c.URL), clientkit.CheckURL("APP_DIRECTOR_OAUTH_TOKEN_URL", c.OAuthTokenURL),
		clientkit.Require("APP_DIRECTOR_OAUTH_CLIENT_ID", c.OAuthClientID))
}
