package edp

import (
	"errors"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
)

// Config configures the EDP client. Read it with envconfig.Process("APP", &cfg): the variables are
// APP_EDP_URL, APP_EDP_OAUTH_URL, APP_EDP_CLIENT_ID, ...
type Config struct {
	// URL is the base of the EDP API; the client calls <URL>/namespaces/<Namespace>/dataTenants.
	URL string `envconfig:"EDP_URL"`
	// OAuthURL is the OAuth2 token endpoint (client credentials grant).
	OAuthURL     string `envconfig:"EDP_OAUTH_URL"`
	ClientID     string `envconfig:"EDP_CLIENT_ID"`
	ClientSecret string `envconfig:"EDP_CLIENT_SECRET"`
	// Namespace is the EDP namespace runtimes are registered in.
	Namespace string `envconfig:"EDP_NAMESPACE"`
	// Environment is the data tenant environment a runtime is registered with: a runtime is the data
	// tenant <subaccount ID>/<Environment>.
	Environment string `envconfig:"EDP_ENVIRONMENT" default:"prod"`
	// Disabled tells the provisioning and deprovisioning steps to skip EDP altogether; nothing else is
	// then required. New refuses a disabled configuration.
	Disabled bool `envconfig:"EDP_DISABLED"`
	// Timeout bounds one HTTP request (token requests included).
	Timeout time.Duration `envconfig:"EDP_TIMEOUT" default:"10s"`
	// Config is what every client shares: the call policy (APP_EXTERNAL_CALL_*), metrics, transport.
	clientkit.Config
	// RetryInitialBackoff and RetryMaxBackoff shape the exponential backoff between retries of
	// transient failures.
	RetryInitialBackoff time.Duration `envconfig:"EDP_RETRY_INITIAL_BACKOFF" default:"200ms"`
	RetryMaxBackoff     time.Duration `envconfig:"EDP_RETRY_MAX_BACKOFF" default:"10s"`
}

func (c *Config) withDefaults() {
	if c.Environment == "" {
		c.Environment = "prod"
	}
	c.Timeout, c.RetryInitialBackoff, c.RetryMaxBackoff = clientkit.Defaults(c.Timeout, c.RetryInitialBackoff, c.RetryMaxBackoff)
}

// Validate reports missing or malformed settings; a disabled configuration is always valid.
func (c Config) Validate() error {
	if c.Disabled {
		return nil
	}
	errs := []error{clientkit.CheckURL("APP_EDP_URL", c.URL), clientkit.CheckURL("APP_EDP_OAUTH_URL", c.OAuthURL),
		clientkit.Require("APP_EDP_CLIENT_ID", c.ClientID)}
	if c.Namespace == "" {
		errs = append(errs, errors.New("APP_EDP_NAMESPACE is required"))
	} else if strings.Contains(c.Namespace, "/") {
		errs = append(errs, errors.New("APP_EDP_NAMESPACE must not contain '/'"))
	}
	if strings.Contains(c.Environment, "/") {
		errs = append(errs, errors.New("APP_EDP_ENVIRONMENT must not contain '/'"))
	}
	return errors.Join(errs...)
}
