// Package provisioning holds the steps of the broker's provisioning process (seed 001:
// stages create_runtime, check_runtime, create_kyma, post_actions), one file per step.
package provisioning

import (
	"strconv"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Op is a provisioning operation as its steps see it.
type Op = engine.Operation[instance.ProvisioningData]

// RuntimeDefaults are what a runtime gets when the parameters do not say.
type RuntimeDefaults struct {
	KubernetesVersion string   `envconfig:"KUBERNETES_VERSION" default:"1.31"`
	KymaVersion       string   `envconfig:"KYMA_VERSION" default:"2.20.0"`
	Components        []string `envconfig:"COMPONENTS" default:"istio,api-gateway,serverless,eventing,monitoring"`
	// DashboardURL is the console used when the Director does not know the runtime's own;
	// an instance's dashboard is then <url>/?kubeconfigID=<instance>.
	DashboardURL string `envconfig:"DASHBOARD_URL" default:"https://dashboard.kyma.local"`
}

// Deps are what the provisioning steps use.
type Deps struct {
	Instances    storage.Instances
	Provisioner  client.Client
	PollInterval time.Duration
	Defaults     RuntimeDefaults
	// Systems are the external systems; nil ones are disabled and their steps skipped.
	Systems systems.Systems
	// Overrides are the configured default overrides (Overrides_From_Secrets_And_Config_Step).
	Overrides overrides.Defaults
}

// KubeconfigSecret is where Get_Kubeconfig keeps the runtime's kubeconfig in the operation's
// encrypted secrets.
const KubeconfigSecret = "kubeconfig"

// Kyma2 tells whether version is Kyma 2.x or later, which the reconciler installs; older versions
// the provisioner installs with the runtime.
func Kyma2(version string) bool {
	major, _, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	n, err := strconv.Atoi(major)
	return err != nil || n >= 2 // unparsable versions (e.g. "main-abc") are development builds of 2.x
}

// ReconcilerInstalls: the reconciler installs the runtime's Kyma (2.x with a reconciler), so the
// create_kyma stage runs and the provisioner installs none.
func (d Deps) ReconcilerInstalls(op Op) bool {
	return d.Systems.Reconciler != nil && Kyma2(op.Data.KymaVersion)
}
