package reconciler

import (
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
)

// Config configures the Reconciler client. Read it with envconfig.Process("APP", &cfg): the variables are
// APP_RECONCILER_URL, APP_RECONCILER_TIMEOUT, ... The mothership API has no authentication in front of it.
type Config struct {
	// URL is the base of the mothership API; the client calls <URL>/v1/clusters. It is required only
	// when the broker provisions Kyma 2.x runtimes, so New checks it and envconfig does not.
	URL string `envconfig:"RECONCILER_URL"`
	// Timeout bounds one HTTP request.
	Timeout time.Duration `envconfig:"RECONCILER_TIMEOUT" default:"10s"`
	// Config is what every client shares: the call policy (APP_EXTERNAL_CALL_*), metrics, transport.
	clientkit.Config
	// RetryInitialBackoff and RetryMaxBackoff shape the exponential backoff between retries of
	// transient failures.
	RetryInitialBackoff time.Duration `envconfig:"RECONCILER_RETRY_INITIAL_BACKOFF" default:"200ms"`
	RetryMaxBackoff     time.Duration `envconfig:"RECONCILER_RETRY_MAX_BACKOFF" default:"10s"`
}

func (c *Config) withDefaults() {
	c.Timeout, c.RetryInitialBackoff, c.RetryMaxBackoff = clientkit.Defaults(c.Timeout, c.RetryInitialBackoff, c.RetryMaxBackoff)
}

// Validate reports missing or malformed settings.
func (c Config) Validate() error {
	return clientkit.CheckURL("APP_RECONCILER_URL", c.URL)
}
