package servicemanager

import (
	"errors"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
)

// Config configures the Service Manager client. Read it with envconfig.Process("APP", &cfg): the
// variables are APP_SERVICE_MANAGER_URL, APP_SERVICE_MANAGER_TOKEN_URL, ... The credentials are
// optional: they are the default ones, used when an instance's context brings none
// (sm_operator_credentials); when one of them is set, URL, TokenURL and ClientID are required.
type Config struct {
	// URL is the base of the Service Manager API (sm_url); the client calls <URL>/v1/...
	URL string `envconfig:"SERVICE_MANAGER_URL"`
	// TokenURL is the base of the UAA (url); tokens come from <TokenURL>/oauth/token.
	TokenURL     string `envconfig:"SERVICE_MANAGER_TOKEN_URL"`
	ClientID     string `envconfig:"SERVICE_MANAGER_CLIENT_ID"`
	ClientSecret string `envconfig:"SERVICE_MANAGER_CLIENT_SECRET"`
	// Timeout bounds one HTTP request (token requests included).
	Timeout time.Duration `envconfig:"SERVICE_MANAGER_TIMEOUT" default:"10s"`
	// Config is what every client shares: the call policy (APP_EXTERNAL_CALL_*), metrics, transport.
	clientkit.Config
	// RetryInitialBackoff and RetryMaxBackoff shape the exponential backoff between retries of
	// transient failures.
	RetryInitialBackoff time.Duration `envconfig:"SERVICE_MANAGER_RETRY_INITIAL_BACKOFF" default:"200ms"`
	RetryMaxBackoff     time.Duration `envconfig:"SERVICE_MANAGER_RETRY_MAX_BACKOFF" default:"10s"`
	// PlanCacheTTL is how long a plan ID resolved from the offering's and plan's catalog names is
	// used without asking again; 0 or less resolves it on every provisioning.
	PlanCacheTTL time.Duration `envconfig:"SERVICE_MANAGER_PLAN_CACHE_TTL" default:"5m"`
}

func (c *Config) withDefaults() {
	c.Timeout, c.RetryInitialBackoff, c.RetryMaxBackoff = clientkit.Defaults(c.Timeout, c.RetryInitialBackoff, c.RetryMaxBackoff)
}

// configured tells whether default credentials are set at all.
func (c Config) configured() bool {
	return c.URL != "" || c.TokenURL != "" || c.ClientID != "" || c.ClientSecret != ""
}

// Validate reports malformed settings: none of the credentials is required, but once one is set the
// others are, since half a set of credentials cannot be used.
func (c Config) Validate() error {
	if !c.configured() {
		return nil
	}
	return validateCredentials(Credentials{ClientID: c.ClientID, ClientSecret: c.ClientSecret, URL: c.URL, TokenURL: c.TokenURL},
		"APP_SERVICE_MANAGER_URL", "APP_SERVICE_MANAGER_TOKEN_URL", "APP_SERVICE_MANAGER_CLIENT_ID")
}

// validateCredentials reports what is missing or malformed in creds, naming the fields as given.
func validateCredentials(creds Credentials, urlName, tokenURLName, clientIDName string) error {
	errs := []error{clientkit.CheckURL(urlName, creds.URL), clientkit.CheckURL(tokenURLName, creds.TokenURL),
		clientkit.Require(clientIDName, creds.ClientID)}
	return errors.Join(errs...)
}
