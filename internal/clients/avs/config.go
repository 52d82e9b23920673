package avs

import (
	"errors"
	"net/http"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
)

// Config configures the AVS client. Read it with envconfig.Process("APP", &cfg): the variables are
// APP_AVS_URL, APP_AVS_OAUTH_URL, APP_AVS_CLIENT_ID, ...
type Config struct {
	// URL is the base of the AVS API; the client calls <URL>/api/v2/evaluationmetadata.
	URL string `envconfig:"AVS_URL"`
	// OAuthURL is the OAuth2 token endpoint (client credentials grant).
	OAuthURL     string `envconfig:"AVS_OAUTH_URL"`
	ClientID     string `envconfig:"AVS_CLIENT_ID"`
	ClientSecret string `envconfig:"AVS_CLIENT_SECRET"`
	// ParentID is the parent evaluation internal evaluations are created under.
	ParentID int64 `envconfig:"AVS_PARENT_ID"`
	// InternalTesterAccessID and ExternalTesterAccessID are the tester access ids of internal and
	// external evaluations.
	InternalTesterAccessID int64 `envconfig:"AVS_INTERNAL_TESTER_ACCESS_ID"`
	ExternalTesterAccessID int64 `envconfig:"AVS_EXTERNAL_TESTER_ACCESS_ID"`
	// Timeout bounds one HTTP request (token requests included).
	Timeout time.Duration `envconfig:"AVS_TIMEOUT" default:"10s"`
	// Calls bounds one call: its attempts and budget, and the breaker that fails calls at once
	// while the system is down (APP_EXTERNAL_CALL_*, shared by every client).
	Calls clientkit.Calls `envconfig:"EXTERNAL_CALL"`
	// Metrics, when set, count and time the client's requests (keb_external_* on /metrics).
	Metrics *clientkit.CallMetrics `ignored:"true"`
	// Transport, when set, sends the client's requests (the embedded sandbox's in-process
	// transport); else a pooled transport of the client's own.
	Transport http.RoundTripper `ignored:"true"`
	// RetryInitialBackoff and RetryMaxBackoff shape the exponential backoff between retries of
	// transient failures.
	RetryInitialBackoff time.Duration `envconfig:"AVS_RETRY_INITIAL_BACKOFF" default:"200ms"`
	RetryMaxBackoff     time.Duration `envconfig:"AVS_RETRY_MAX_BACKOFF" default:"10s"`
}

func (c *Config) withDefaults() {
	c.Timeout, c.RetryInitialBackoff, c.RetryMaxBackoff = clientkit.Defaults(c.Timeout, c.RetryInitialBackoff, c.RetryMaxBackoff)
}

// Validate reports missing or malformed settings.
func (c Config) Validate() error {
	return errors.Join(clientkit.CheckURL("APP_AVS_URL", c.URL), clientkit.CheckURL("APP_AVS_OAUTH_URL", c.OAuthURL),
		clientkit.Require("APP_AVS_CLIENT_ID", c.ClientID))
}
