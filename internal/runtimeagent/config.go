// Package runtimeagent is the Runtime Agent's controller (seed 003): it connects the runtime to
// Compass with a one-time token, keeps the connection alive by renewing its client certificate,
// reports everything in the CompassConnection resource and synchronises the Applications the
// Director assigns to the runtime.
package runtimeagent

import (
	"fmt"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/sirupsen/logrus"
)

// defaultAgentConfigurationSecret is where the provisioner writes the agent's connection details
// (runtimeclient.DefaultAgentConfigSecret; a test keeps them equal). It is restated here so the agent
// does not link the provisioner's runtime client and, through it, the module registry code.
const defaultAgentConfigurationSecret = "compass-system/compass-agent-configuration"

// Config is read from APP_* variables (docs/user/runtime-agent.md).
type Config struct {
	// Kubeconfig is a kubeconfig file for development; empty means the in-cluster configuration.
	Kubeconfig string `envconfig:"KUBECONFIG"`
	// AgentConfigurationSecret (namespace/name) holds CONNECTOR_URL, RUNTIME_ID, TENANT, TOKEN.
	// Empty takes defaultAgentConfigurationSecret, where the provisioner writes it.
	AgentConfigurationSecret string `envconfig:"AGENT_CONFIGURATION_SECRET"`
	// ClusterCertificatesSecret (namespace/name) receives the client certificate and key.
	ClusterCertificatesSecret string `envconfig:"CLUSTER_CERTIFICATES_SECRET" default:"kyma-system/cluster-client-certificates"`
	// CACertificatesSecret (namespace/name) receives the Connector's CA certificate.
	CACertificatesSecret string `envconfig:"CA_CERTIFICATES_SECRET" default:"istio-system/ca-certificates"`
	// ConnectionName is the cluster-scoped CompassConnection the agent reports through.
	ConnectionName string `envconfig:"COMPASS_CONNECTION_NAME" default:"compass-connection"`
	// ControllerSyncPeriod is how often the agent checks the connection and synchronises.
	ControllerSyncPeriod time.Duration `envconfig:"CONTROLLER_SYNC_PERIOD" default:"20s"`
	// MinimalCompassSyncTime is the least time between two synchronisations with the Director.
	MinimalCompassSyncTime time.Duration `envconfig:"MINIMAL_COMPASS_SYNC_TIME" default:"10s"`
	// CertValidityRenewalThreshold: the certificate is renewed once less than this fraction of
	// its lifetime remains.
	CertValidityRenewalThreshold float64 `envconfig:"CERT_VALIDITY_RENEWAL_THRESHOLD" default:"0.3"`
	// CertKeyBits is the RSA key size of every new key (tests use smaller keys to be fast).
	CertKeyBits int `envconfig:"CERT_KEY_BITS" default:"4096"`
	// ConnectorCAFile is a PEM bundle trusted for the token-secured Connector; empty means the
	// system roots. The certificate-secured endpoints are trusted through the CA the Connector
	// hands out.
	ConnectorCAFile string `envconfig:"CONNECTOR_CA_FILE"`
	// RuntimeEventsURL and RuntimeConsoleURL label the runtime in the Director.
	RuntimeEventsURL  string `envconfig:"RUNTIME_EVENTS_URL"`
	RuntimeConsoleURL string `envconfig:"RUNTIME_CONSOLE_URL"`
	// CredentialsNamespace holds the Secrets with the Applications' credentials.
	CredentialsNamespace string `envconfig:"CREDENTIALS_NAMESPACE" default:"kyma-integration"`
	// CallTimeout bounds one call to the Connector or the Director.
	CallTimeout time.Duration `envconfig:"CALL_TIMEOUT" default:"30s"`
	// ReconnectBackoffMin and ReconnectBackoffMax bound the waits between failed connection
	// attempts (doubling from min up to max).
	ReconnectBackoffMin time.Duration `envconfig:"RECONNECT_BACKOFF_MIN" default:"1s"`
	ReconnectBackoffMax time.Duration `envconfig:"RECONNECT_BACKOFF_MAX" default:"2m"`
	// Leader election: a Lease in LeaderElectionNamespace named LeaderElectionName, so that of
	// several replicas only one acts.
	LeaderElectionNamespace string        `envconfig:"LEADER_ELECTION_NAMESPACE" default:"compass-system"`
	LeaderElectionName      string        `envconfig:"LEADER_ELECTION_NAME" default:"compass-runtime-agent"`
	LeaseDuration           time.Duration `envconfig:"LEADER_ELECTION_LEASE_DURATION" default:"15s"`
	RenewDeadline           time.Duration `envconfig:"LEADER_ELECTION_RENEW_DEADLINE" default:"10s"`
	RetryPeriod             time.Duration `envconfig:"LEADER_ELECTION_RETRY_PERIOD" default:"2s"`
	// HealthAddress serves /healthz, /readyz and /metrics (empty: none).
	HealthAddress string `envconfig:"HEALTH_ADDRESS" default:":8090"`
	// KubeQPS and KubeBurst are the client-side rate limit of the agent's Kubernetes calls
	// (client-go's own default of 5/s and 10 makes a sync of many applications slow).
	KubeQPS   float32 `envconfig:"KUBE_QPS" default:"200"`
	KubeBurst int     `envconfig:"KUBE_BURST" default:"400"`
}

// LoadConfig reads the configuration from APP_* variables and validates it.
func LoadConfig() (Config, error) {
	var c Config
	if err := envconfig.Process("APP", &c); err != nil {
		return Config{}, fmt.Errorf("reading the agent's configuration: %w", err)
	}
	c = c.withDefaults()
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

func (c Config) withDefaults() Config {
	if c.AgentConfigurationSecret == "" {
		c.AgentConfigurationSecret = defaultAgentConfigurationSecret
	}
	if c.KubeQPS == 0 {
		c.KubeQPS = 200
	}
	if c.KubeBurst == 0 {
		c.KubeBurst = 400
	}
	return c
}

// Validate checks the settings that would otherwise fail late.
func (c Config) Validate() error {
	for name, ref := range map[string]string{
		"APP_AGENT_CONFIGURATION_SECRET":  c.AgentConfigurationSecret,
		"APP_CLUSTER_CERTIFICATES_SECRET": c.ClusterCertificatesSecret,
		"APP_CA_CERTIFICATES_SECRET":      c.CACertificatesSecret,
	} {
		if _, err := ParseSecretRef(ref); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	switch {
	case c.CertValidityRenewalThreshold <= 0 || c.CertValidityRenewalThreshold >= 1:
		return fmt.Errorf("APP_CERT_VALIDITY_RENEWAL_THRESHOLD must be between 0 and 1, is %v", c.CertValidityRenewalThreshold)
	case c.CertKeyBits < 1024:
		return fmt.Errorf("APP_CERT_KEY_BITS must be at least 1024, is %d", c.CertKeyBits)
	case c.ControllerSyncPeriod <= 0 || c.MinimalCompassSyncTime < 0 || c.CallTimeout <= 0:
		return fmt.Errorf("APP_CONTROLLER_SYNC_PERIOD and APP_CALL_TIMEOUT must be positive, APP_MINIMAL_COMPASS_SYNC_TIME not negative")
	case c.ReconnectBackoffMin <= 0 || c.ReconnectBackoffMax < c.ReconnectBackoffMin:
		return fmt.Errorf("APP_RECONNECT_BACKOFF_MIN must be positive and at most APP_RECONNECT_BACKOFF_MAX")
	case c.KubeQPS < 0 || c.KubeBurst < 0:
		return fmt.Errorf("APP_KUBE_QPS and APP_KUBE_BURST must not be negative")
	case c.LeaseDuration > 0 && c.RenewDeadline >= c.LeaseDuration:
		return fmt.Errorf("APP_LEADER_ELECTION_RENEW_DEADLINE must be shorter than APP_LEADER_ELECTION_LEASE_DURATION")
	case c.ConnectionName == "" || c.CredentialsNamespace == "":
		return fmt.Errorf("APP_COMPASS_CONNECTION_NAME and APP_CREDENTIALS_NAMESPACE must not be empty")
	}
	return nil
}

// StartupFields describe the configuration in the start-up log. Their names avoid the words the
// log's redaction takes for secrets ("secret", "token", ...): these are names, not contents.
func StartupFields(c Config) logrus.Fields {
	return logrus.Fields{
		"configurationFrom": c.AgentConfigurationSecret, "certificateIn": c.ClusterCertificatesSecret, "caIn": c.CACertificatesSecret,
		"compassConnection": c.ConnectionName, "leaderLease": c.LeaderElectionNamespace + "/" + c.LeaderElectionName,
	}
}

// SecretRef names a Secret.
type SecretRef struct{ Namespace, Name string }

func (r SecretRef) String() string { return r.Namespace + "/" + r.Name }

// ParseSecretRef reads "namespace/name".
func ParseSecretRef(s string) (SecretRef, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return SecretRef{}, fmt.Errorf("%q is not namespace/name", s)
	}
	return SecretRef{Namespace: ns, Name: name}, nil
}
