// Package instance holds what the broker's operations carry: the instance's parameters as the
// platform gave them (validated, defaults applied) and each process's payload. Handlers create
// these; steps read and extend them.
package instance

import (
	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Operation types of the broker, kept here for the packages that name them through instance; the
// store records them and owns them (storage.Type*).
const (
	TypeProvision      = storage.TypeProvision
	TypeDeprovision    = storage.TypeDeprovision
	TypeUpdate         = storage.TypeUpdate
	TypeSuspension     = storage.TypeSuspension
	TypeUpgradeKyma    = storage.TypeUpgradeKyma
	TypeUpgradeCluster = storage.TypeUpgradeCluster
)

// AllTypes are every operation type of the broker: an instance runs one of them at a time.
func AllTypes() []string { return storage.OperationTypes() }

// OIDC is the runtime's OIDC configuration.
type OIDC struct {
	ClientID       string   `json:"clientID"`
	IssuerURL      string   `json:"issuerURL"`
	GroupsClaim    string   `json:"groupsClaim,omitempty"`
	UsernameClaim  string   `json:"usernameClaim,omitempty"`
	UsernamePrefix string   `json:"usernamePrefix,omitempty"`
	SigningAlgs    []string `json:"signingAlgs,omitempty"`
}

// Networking are the cluster's CIDRs.
type Networking struct {
	Nodes    string `json:"nodes,omitempty"`
	Pods     string `json:"pods,omitempty"`
	Services string `json:"services,omitempty"`
}

// Parameters are an instance's provisioning (and updated) parameters.
type Parameters struct {
	Name           string      `json:"name"`
	Region         string      `json:"region,omitempty"`
	MachineType    string      `json:"machineType,omitempty"`
	AutoScalerMin  int         `json:"autoScalerMin,omitempty"`
	AutoScalerMax  int         `json:"autoScalerMax,omitempty"`
	OIDC           *OIDC       `json:"oidc,omitempty"`
	Administrators []string    `json:"administrators,omitempty"`
	Networking     *Networking `json:"networking,omitempty"`
	Modules        *Modules    `json:"modules,omitempty"`
	KymaVersion    string      `json:"kymaVersion,omitempty"`
}

// Modules are the Kyma modules of the runtime (the OSB modules parameter): Default true or nil
// the default modules, false none; List exactly these.
type Modules struct {
	Default *bool    `json:"default,omitempty"`
	List    []Module `json:"list,omitempty"`
}

// Module is one Kyma module; empty Channel and CustomResourcePolicy mean the module's defaults.
type Module struct {
	Name                 string `json:"name"`
	Channel              string `json:"channel,omitempty"`
	CustomResourcePolicy string `json:"customResourcePolicy,omitempty"`
}

// Context is what the platform told about the instance's owner.
type Context struct {
	Platform        string `json:"platform,omitempty"`
	GlobalAccountID string `json:"globalaccount_id"`
	SubAccountID    string `json:"subaccount_id"`
	UserID          string `json:"user_id,omitempty"`
}

// ProvisioningData is the payload of a provisioning operation.
type ProvisioningData struct {
	ServiceID      string     `json:"service_id"`
	PlanID         string     `json:"plan_id"`
	PlanName       string     `json:"plan_name"`
	Provider       string     `json:"provider"`
	PlatformRegion string     `json:"platform_region"`
	Parameters     Parameters `json:"parameters"`
	Context        Context    `json:"context"`
	// RuntimeInput is what Create_Runtime sends to the provisioner (built by Initialization);
	// Create_Runtime drops it once the provisioner accepted the runtime.
	RuntimeInput *gqlschema.ProvisionRuntimeInput `json:"runtime_input,omitempty"`
	// RuntimeID and ProvisionerOperationID are set once the provisioner accepted the runtime.
	RuntimeID              string `json:"runtime_id,omitempty"`
	ProvisionerOperationID string `json:"provisioner_operation_id,omitempty"`

	// KymaVersion is the Kyma version installed (parameters or default); 2.x is installed by
	// the reconciler (create_kyma), older ones by the provisioner.
	KymaVersion string `json:"kyma_version,omitempty"`
	// TargetSecret is the hyperscaler account secret Resolve_Target_Secret picked.
	TargetSecret string `json:"target_secret,omitempty"`
	// ShootName and ShootDomain are the cluster's, known after Check_Runtime.
	ShootName   string `json:"shoot_name,omitempty"`
	ShootDomain string `json:"shoot_domain,omitempty"`
	// Overrides are the components' configuration entries the steps collected; secret values
	// live in the operation's encrypted secrets. Kept so upgrades start from them.
	Overrides overrides.Overrides `json:"overrides,omitempty"`
	// Resources are what the steps created in external systems; deprovisioning removes them.
	Resources Resources `json:"resources"`
	// ReconcilerConfigurationVersion is the cluster configuration Create_Cluster_Configuration applied.
	ReconcilerConfigurationVersion int64 `json:"reconciler_configuration_version,omitempty"`
}

// Resources are the objects an instance's provisioning created in external systems.
type Resources struct {
	AVSInternalEvaluationID int64 `json:"avs_internal_evaluation_id,omitempty"`
	AVSExternalEvaluationID int64 `json:"avs_external_evaluation_id,omitempty"`
	// AVSTagged tells that AVS_Tags finished.
	AVSTagged bool `json:"avs_tagged,omitempty"`
	// AVSUnconfirmed names the evaluations whose creation AVS may have carried out without the
	// broker learning their IDs (AVS cannot be searched by name): for an operator to remove.
	AVSUnconfirmed []string `json:"avs_unconfirmed,omitempty"`
	// IASServiceProviderID is the runtime's IAS service provider; IASClientID its OIDC client.
	IASServiceProviderID string `json:"ias_service_provider_id,omitempty"`
	IASClientID          string `json:"ias_client_id,omitempty"`
	IASOIDCConfigured    bool   `json:"ias_oidc_configured,omitempty"`
	// EDPSubAccountID is the subaccount registered in EDP.
	EDPSubAccountID string `json:"edp_subaccount_id,omitempty"`
	// EventHubResourceGroup and EventHubNamespace are the Azure Event Hubs namespace (Kyma 1.x Kafka).
	EventHubResourceGroup string `json:"event_hub_resource_group,omitempty"`
	EventHubNamespace     string `json:"event_hub_namespace,omitempty"`
	// EventHubAsyncOperation and EventHubLocation are the URLs (Azure-AsyncOperation, Location)
	// of the namespace's creation while Azure runs it asynchronously, kept so that a run after a
	// restart follows the same operation; empty otherwise.
	EventHubAsyncOperation string `json:"event_hub_async_operation,omitempty"`
	EventHubLocation       string `json:"event_hub_location,omitempty"`
	// EMSInstanceID and EMSBindingID are the Enterprise Messaging instance and its binding.
	EMSInstanceID string `json:"ems_instance_id,omitempty"`
	EMSBindingID  string `json:"ems_binding_id,omitempty"`
	// ReconcilerClusterID is the runtime registered with the reconciler.
	ReconcilerClusterID string `json:"reconciler_cluster_id,omitempty"`
}

// DeprovisioningData is the payload of a deprovisioning operation.
type DeprovisioningData struct {
	GlobalAccountID        string `json:"globalaccount_id"`
	RuntimeID              string `json:"runtime_id,omitempty"`
	ProvisionerOperationID string `json:"provisioner_operation_id,omitempty"`
	// Resources are read by Deprovision_Initialization from the instance's provisioning; each step
	// clears what it removed, so a rerun does not remove it again.
	Resources Resources `json:"resources"`
	// Initialized tells that Resources were read.
	Initialized bool `json:"initialized,omitempty"`
}

// UpdateData is the payload of an update operation.
type UpdateData struct {
	GlobalAccountID        string     `json:"globalaccount_id"`
	RuntimeID              string     `json:"runtime_id"`
	PlanID                 string     `json:"plan_id"`
	Parameters             Parameters `json:"parameters"`
	ProvisionerOperationID string     `json:"provisioner_operation_id,omitempty"`
	// ModulesOperationID is the provisioner's upgrade that applies changed modules.
	ModulesOperationID string `json:"modules_operation_id,omitempty"`
}

// UpgradeKymaData is the payload of a Kyma upgrade. The operator API sets the target version;
// Upgrade_Kyma_Initialisation fills in the rest from the instance's provisioning.
type UpgradeKymaData struct {
	KymaVersion string `json:"kyma_version"`

	Initialized     bool     `json:"initialized,omitempty"`
	GlobalAccountID string   `json:"globalaccount_id,omitempty"`
	SubAccountID    string   `json:"subaccount_id,omitempty"`
	RuntimeID       string   `json:"runtime_id,omitempty"`
	PlanID          string   `json:"plan_id,omitempty"`
	PlanName        string   `json:"plan_name,omitempty"`
	ServiceID       string   `json:"service_id,omitempty"`
	Provider        string   `json:"provider,omitempty"`
	Region          string   `json:"region,omitempty"`
	Name            string   `json:"name,omitempty"`
	ShootName       string   `json:"shoot_name,omitempty"`
	Administrators  []string `json:"administrators,omitempty"`
	// Modules are the instance's modules parameter as it is now (provisioned or updated).
	Modules *Modules `json:"modules,omitempty"`
	// ProvisioningOperationID is the provisioning the upgrade started from.
	ProvisioningOperationID string `json:"provisioning_operation_id,omitempty"`
	// Overrides start as the provisioning's (secret values copied into this operation's secrets).
	Overrides overrides.Overrides `json:"overrides,omitempty"`
	Resources Resources           `json:"resources"`

	ProvisionerOperationID         string `json:"provisioner_operation_id,omitempty"`
	ReconcilerConfigurationVersion int64  `json:"reconciler_configuration_version,omitempty"`
}

// UpgradeClusterData is the payload of a cluster upgrade.
type UpgradeClusterData struct {
	KubernetesVersion   string `json:"kubernetes_version,omitempty"`
	MachineImageVersion string `json:"machine_image_version,omitempty"`

	GlobalAccountID        string `json:"globalaccount_id,omitempty"`
	RuntimeID              string `json:"runtime_id,omitempty"`
	ProvisionerOperationID string `json:"provisioner_operation_id,omitempty"`
}
