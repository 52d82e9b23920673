// Package provisioning holds the steps of the broker's provisioning process (seed 001:
// stages create_runtime, check_runtime, create_kyma, post_actions), one file per step.
package provisioning

import (
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Op is a provisioning operation as its steps see it.
type Op = process.Operation[instance.ProvisioningData]

// RuntimeDefaults are what a runtime gets when the parameters do not say.
type RuntimeDefaults struct {
	KubernetesVersion string   `envconfig:"KUBERNETES_VERSION" default:"1.31"`
	KymaVersion       string   `envconfig:"KYMA_VERSION" default:"2.20.0"`
	Components        []string `envconfig:"COMPONENTS" default:"istio,api-gateway,serverless,eventing"`
	// DashboardURL is the console; an instance's dashboard is <url>/?kubeconfigID=<instance>.
	DashboardURL string `envconfig:"DASHBOARD_URL" default:"https://dashboard.kyma.local"`
	// TargetSecretPrefix names the hyperscaler account secret per provider until the
	// account pool (Resolve_Target_Secret) picks one.
	TargetSecretPrefix string `envconfig:"TARGET_SECRET_PREFIX" default:"kyma-"`
}

// Deps are what the provisioning steps use.
type Deps struct {
	Instances    storage.Instances
	Provisioner  client.Client
	PollInterval time.Duration
	Defaults     RuntimeDefaults
}
