package deprovisioning

import (
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process"
)

// Process is the deprovisioning process, by weight; Remove_Runtime runs last.
func Process(d Deps, timeout time.Duration) (*process.Process[instance.DeprovisioningData], error) {
	return weighted(instance.TypeDeprovision, d, timeout)
}

// SuspensionProcess removes a trial's runtime with the same steps, keeping the instance.
func SuspensionProcess(d Deps, timeout time.Duration) (*process.Process[instance.DeprovisioningData], error) {
	return weighted(instance.TypeSuspension, d, timeout)
}

func weighted(opType string, d Deps, timeout time.Duration) (*process.Process[instance.DeprovisioningData], error) {
	w := func(weight int, s process.Step[instance.DeprovisioningData]) process.WeightedStep[instance.DeprovisioningData] {
		return process.WeightedStep[instance.DeprovisioningData]{Weight: weight, StepDef: process.StepDef[instance.DeprovisioningData]{Step: s}}
	}
	return process.Weighted(opType, timeout, w(1, Initialization{d}), w(10, RemoveRuntime{d}))
}
