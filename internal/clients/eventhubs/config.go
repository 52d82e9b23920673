package eventhubs

import (
	"errors"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
)

// DefaultARMURL is Azure Resource Manager of the public cloud.
const DefaultARMURL = "https://management.azure.com"

// Config configures the Azure client. Read it with envconfig.Process("APP", &cfg): the variables are
// APP_AZURE_ARM_URL, APP_AZURE_TOKEN_URL, APP_AZURE_CLIENT_ID, ...
type Config struct {
	// ARMURL is the base of Azure Resource Manager; tokens are requested for the scope <ARMURL>/.default.
	ARMURL string `envconfig:"AZURE_ARM_URL" default:"https://management.azure.com"`
	// TokenURL is the full OAuth2 token endpoint of the tenant, e.g.
	// https://login.microsoftonline.com/<tenant>/oauth2/v2.0/token.
	TokenURL string `envconfig:"AZURE_TOKEN_URL"`
	// ClientID and ClientSecret are the service principal's client credentials.
	ClientID     string `envconfig:"AZURE_CLIENT_ID"`
	ClientSecret string `envconfig:"AZURE_CLIENT_SECRET"`
	// SubscriptionID is the subscription the resource groups are created in.
	SubscriptionID string `envconfig:"AZURE_SUBSCRIPTION_ID"`
	// Timeout bounds one HTTP request (token requests included).
	Timeout time.Duration `envconfig:"AZURE_TIMEOUT" default:"10s"`
	// Config is what every client shares: the call policy (APP_EXTERNAL_CALL_*), metrics, transport.
	clientkit.Config
	// RetryInitialBackoff and RetryMaxBackoff shape the exponential backoff between retries of
	// transient failures.
	RetryInitialBackoff time.Duration `envconfig:"AZURE_RETRY_INITIAL_BACKOFF" default:"200ms"`
	RetryMaxBackoff     time.Duration `envconfig:"AZURE_RETRY_MAX_BACKOFF" default:"10s"`
}

func (c *Config) withDefaults() {
	if c.ARMURL == "" {
		c.ARMURL = DefaultARMURL
	}
	c.ARMURL = strings.TrimRight(c.ARMURL, "/")
	c.Timeout, c.RetryInitialBackoff, c.RetryMaxBackoff = clientkit.Defaults(c.Timeout, c.RetryInitialBackoff, c.RetryMaxBackoff)
}

// Validate reports missing or malformed settings; an empty ARMURL stands for DefaultARMURL.
func (c Config) Validate() error {
	errs := []error{clientkit.CheckURL("APP_AZURE_TOKEN_URL", c.TokenURL),
		clientkit.Require("APP_AZURE_CLIENT_ID", c.ClientID), clientkit.Require("APP_AZURE_CLIENT_SECRET", c.ClientSecret)}
	if c.ARMURL != "" { // empty takes the public cloud's
		errs = append(errs, clientkit.CheckURL("APP_AZURE_ARM_URL", c.ARMURL))
	}
	if c.SubscriptionID == "" {
		errs = append(errs, errors.New("APP_AZURE_SUBSCRIPTION_ID is required"))
	} else if strings.ContainsAny(c.SubscriptionID, "/?#") {
		errs = append(errs, errors.New("APP_AZURE_SUBSCRIPTION_ID must not contain '/', '?' or '#'"))
	}
	return errors.Join(errs...)
}
