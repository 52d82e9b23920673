// Package config is the Runtime Provisioner's configuration: the APP_* variables of its README
// (seed 000) plus the per-stage timeouts of the Compass provisioner.
package config

import (
	"fmt"
	"time"

	"github.com/kelseyhightower/envconfig"
)

// Config is read with envconfig.Process("APP", &cfg).
type Config struct {
	Address               string `envconfig:"ADDRESS" default:"127.0.0.1:3000"`
	APIEndpoint           string `envconfig:"API_ENDPOINT" default:"/graphql"`
	PlaygroundAPIEndpoint string `envconfig:"PLAYGROUND_API_ENDPOINT" default:"/graphql"`
	// CredentialsNamespace and OAuthCredentialsSecret name the Secret of the control-plane
	// cluster holding the Director's OAuth client (client_id, client_secret, tokens_endpoint);
	// APP_DIRECTOR_OAUTH_* override it. APP_DIRECTOR_URL and APP_SKIP_DIRECTOR_CERT_VERIFICATION
	// are read by the Director client's own configuration (internal/director.Config).
	CredentialsNamespace    string `envconfig:"CREDENTIALS_NAMESPACE" default:"compass-system"`
	OAuthCredentialsSecret  string `envconfig:"OAUTH_CREDENTIALS_SECRET_NAME" default:"compass-provisioner-credentials"`
	GardenerProject         string `envconfig:"GARDENER_PROJECT" default:"gardenerProject"`
	GardenerKubeconfigPath  string `envconfig:"GARDENER_KUBECONFIG_PATH" default:"./dev/kubeconfig.yaml"`
	GardenerAuditLogsPolicy string `envconfig:"GARDENER_AUDIT_LOGS_POLICY_CONFIG_MAP"`
	GardenerAuditLogsTenant string `envconfig:"GARDENER_AUDIT_LOGS_TENANT"`
	// The audit log service of the shoot-auditlog-service extension (with
	// GardenerAuditLogsTenant; Gardener needs all three) and the Secret, in the project
	// namespace, with its credentials.
	GardenerAuditLogServiceURL string `envconfig:"GARDENER_AUDIT_LOG_SERVICE_URL"`
	GardenerAuditLogSecretName string `envconfig:"GARDENER_AUDIT_LOG_SECRET_NAME"`
	// Cloud profile of each provider's Shoots (the gardener backend's defaults when empty:
	// aws, gcp, az; OpenStack has none).
	GardenerCloudProfileAWS       string `envconfig:"GARDENER_CLOUD_PROFILE_AWS"`
	GardenerCloudProfileGCP       string `envconfig:"GARDENER_CLOUD_PROFILE_GCP"`
	GardenerCloudProfileAzure     string `envconfig:"GARDENER_CLOUD_PROFILE_AZURE"`
	GardenerCloudProfileOpenStack string `envconfig:"GARDENER_CLOUD_PROFILE_OPENSTACK"`
	// OpenStack's floating pool and load balancer provider for requests that name none.
	GardenerOpenStackFloatingPoolName     string `envconfig:"GARDENER_OPENSTACK_FLOATING_POOL_NAME"`
	GardenerOpenStackLoadBalancerProvider string `envconfig:"GARDENER_OPENSTACK_LOAD_BALANCER_PROVIDER"`
	// GardenerKubeconfigExpirationSeconds is the validity asked of Gardener for admin
	// kubeconfigs (600 up to 2^32; the backend's 3600 when 0).
	GardenerKubeconfigExpirationSeconds int64 `envconfig:"GARDENER_KUBECONFIG_EXPIRATION_SECONDS"`
	// EnqueueInProgressOperations: when false, operations in progress at start-up are not
	// resumed by this process (they stay as they are until another replica or a restart with
	// true picks them up).
	EnqueueInProgressOperations bool `envconfig:"ENQUEUE_IN_PROGRESS_OPERATIONS" default:"true"`
	// ConnectorURL is handed to the Runtime Agent with its one-time token.
	ConnectorURL string `envconfig:"CONNECTOR_URL" default:"https://compass-gateway.kyma.local/connector/graphql"`

	// ModuleCatalogDir holds the ModuleReleaseMetas and ModuleTemplates (YAML files, as kyma
	// alpha template writes them) of the modules runtimes may request; with it, the provisioner
	// installs a runtime's requested modules (runtimeclient.Modules) and needs
	// ModulePublicKeysFile (PEM RSA public keys the modules must be signed with).
	// ModulePlainHTTPRegistries are registry hosts reached over plain HTTP;
	// ModuleRegistryCredentialsFile is a docker config JSON with the registries' credentials
	// (kept in the provisioner, never written to runtimes nor logged).
	ModuleCatalogDir              string   `envconfig:"MODULE_CATALOG_DIR"`
	ModulePublicKeysFile          string   `envconfig:"MODULE_PUBLIC_KEYS_FILE"`
	ModulePlainHTTPRegistries     []string `envconfig:"MODULE_PLAIN_HTTP_REGISTRIES"`
	ModuleRegistryCredentialsFile string   `envconfig:"MODULE_REGISTRY_CREDENTIALS_FILE"`

	Provisioning   ProvisioningTimeouts   `envconfig:"PROVISIONING_TIMEOUT"`
	Deprovisioning DeprovisioningTimeouts `envconfig:"DEPROVISIONING_TIMEOUT"`
	// OperationTimeout bounds a whole provisioner operation (the engine's deadline).
	OperationTimeout time.Duration `envconfig:"OPERATION_TIMEOUT" default:"24h"`
}

// ProvisioningTimeouts are per-stage limits, measured from the stage's first start.
type ProvisioningTimeouts struct {
	ClusterCreation        time.Duration `envconfig:"CLUSTER_CREATION" default:"60m"`
	ClusterDomains         time.Duration `envconfig:"CLUSTER_DOMAINS" default:"10m"`
	BindingsCreation       time.Duration `envconfig:"BINDINGS_CREATION" default:"5m"`
	InstallationTriggering time.Duration `envconfig:"INSTALLATION_TRIGGERING" default:"20m"`
	Installation           time.Duration `envconfig:"INSTALLATION" default:"60m"`
	Upgrade                time.Duration `envconfig:"UPGRADE" default:"60m"`
	UpgradeTriggering      time.Duration `envconfig:"UPGRADE_TRIGGERING" default:"20m"`
	ShootUpgrade           time.Duration `envconfig:"SHOOT_UPGRADE" default:"30m"`
	Hibernation            time.Duration `envconfig:"HIBERNATION" default:"30m"`
	AgentConfiguration     time.Duration `envconfig:"AGENT_CONFIGURATION" default:"15m"`
	AgentConnection        time.Duration `envconfig:"AGENT_CONNECTION" default:"15m"`
}

// DeprovisioningTimeouts are per-stage limits of deprovisioning.
type DeprovisioningTimeouts struct {
	ClusterCleanup            time.Duration `envconfig:"CLUSTER_CLEANUP" default:"20m"`
	ClusterDeletion           time.Duration `envconfig:"CLUSTER_DELETION" default:"30m"`
	WaitingForClusterDeletion time.Duration `envconfig:"WAITING_FOR_CLUSTER_DELETION" default:"60m"`
}

// Load reads the configuration from APP_* variables.
func Load() (Config, error) {
	var c Config
	if err := envconfig.Process("APP", &c); err != nil {
		return Config{}, fmt.Errorf("reading provisioner configuration: %w", err)
	}
	return c, nil
}
