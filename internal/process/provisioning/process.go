package provisioning

import (
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process"
)

// Stage names of seed 001.
const (
	StageCreateRuntime = "create_runtime"
	StageCheckRuntime  = "check_runtime"
)

// Process is the provisioning process. create_kyma and post_actions join it with the external
// systems' steps.
func Process(d Deps, timeout time.Duration) (*process.Process[instance.ProvisioningData], error) {
	step := func(s process.Step[instance.ProvisioningData]) process.StepDef[instance.ProvisioningData] {
		return process.StepDef[instance.ProvisioningData]{Step: s}
	}
	return process.Staged(instance.TypeProvision, timeout,
		process.Stage[instance.ProvisioningData]{Name: StageCreateRuntime, Steps: []process.StepDef[instance.ProvisioningData]{
			step(Initialization{d}), step(CreateRuntime{Deps: d, RetryTime: 10 * time.Minute}),
		}},
		process.Stage[instance.ProvisioningData]{Name: StageCheckRuntime, Steps: []process.StepDef[instance.ProvisioningData]{step(CheckRuntime{d})}},
	)
}
