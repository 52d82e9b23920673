// Package instance holds what the broker's operations carry: the instance's parameters as the
// platform gave them (validated, defaults applied) and each process's payload. Handlers create
// these; steps read and extend them.
package instance

import "github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"

// Operation types of the broker.
const (
	TypeProvision   = "provision"
	TypeDeprovision = "deprovision"
	TypeUpdate      = "update"
	// TypeSuspension removes a trial's runtime but keeps the instance; a later provisioning of
	// the same instance resumes it.
	TypeSuspension = "suspension"
)

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
	KymaVersion    string      `json:"kymaVersion,omitempty"`
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
	// RuntimeInput is what Create_Runtime sends to the provisioner (built by Initialization).
	RuntimeInput *gqlschema.ProvisionRuntimeInput `json:"runtime_input,omitempty"`
	// RuntimeID and ProvisionerOperationID are set once the provisioner accepted the runtime.
	RuntimeID              string `json:"runtime_id,omitempty"`
	ProvisionerOperationID string `json:"provisioner_operation_id,omitempty"`
}

// DeprovisioningData is the payload of a deprovisioning operation.
type DeprovisioningData struct {
	GlobalAccountID        string `json:"globalaccount_id"`
	RuntimeID              string `json:"runtime_id,omitempty"`
	ProvisionerOperationID string `json:"provisioner_operation_id,omitempty"`
}

// UpdateData is the payload of an update operation.
type UpdateData struct {
	GlobalAccountID        string     `json:"globalaccount_id"`
	RuntimeID              string     `json:"runtime_id"`
	PlanID                 string     `json:"plan_id"`
	Parameters             Parameters `json:"parameters"`
	ProvisionerOperationID string     `json:"provisioner_operation_id,omitempty"`
}
