package ias

import (
	"errors"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
)

// ErrDisabled is returned by New when the configuration disables IAS; the steps that use IAS are
// then skipped and no client is needed.
var ErrDisabled = errors.New("IAS is disabled (APP_IAS_DISABLED)")

// Config configures the IAS client. Read it with envconfig.Process("APP", &cfg): the variables are
// APP_IAS_URL, APP_IAS_USER_ID, APP_IAS_PASSWORD, ...
type Config struct {
	// URL is the base of the IAS API; the client calls <URL>/service/sps.
	URL string `envconfig:"IAS_URL"`
	// UserID and Password are the basic auth credentials of the IAS API.
	UserID   string `envconfig:"IAS_USER_ID"`
	Password string `envconfig:"IAS_PASSWORD"`
	// IdentityProvider is the default authenticating identity provider set on service providers;
	// left as IAS has it when empty.
	IdentityProvider string `envconfig:"IAS_IDENTITY_PROVIDER"`
	// Disabled turns the IAS steps off; nothing else is required then.
	Disabled bool `envconfig:"IAS_DISABLED" default:"false"`
	// Timeout bounds one HTTP request.
	Timeout time.Duration `envconfig:"IAS_TIMEOUT" default:"10s"`
	// Config is what every client shares: the call policy (APP_EXTERNAL_CALL_*), metrics, transport.
	clientkit.Config
	// RetryInitialBackoff and RetryMaxBackoff shape the exponential backoff between retries of
	// transient failures.
	RetryInitialBackoff time.Duration `envconfig:"IAS_RETRY_INITIAL_BACKOFF" default:"200ms"`
	RetryMaxBackoff     time.Duration `envconfig:"IAS_RETRY_MAX_BACKOFF" default:"10s"`
}

func (c *Config) withDefaults() {
	c.Timeout, c.RetryInitialBackoff, c.RetryMaxBackoff = clientkit.Defaults(c.Timeout, c.RetryInitialBackoff, c.RetryMaxBackoff)
}

// Validate reports missing or malformed settings; a disabled configuration is always valid.
func (c Config) Validate() error {
	if c.Disabled {
		return nil
	}
	return errors.Join(clientkit.CheckURL("APP_IAS_URL", c.URL),
		clientkit.Require("APP_IAS_USER_ID", c.UserID), clientkit.Require("APP_IAS_PASSWORD", c.Password))
}
