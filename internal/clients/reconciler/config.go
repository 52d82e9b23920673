package reconciler

import (
	"net/http"
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
