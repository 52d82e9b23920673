package deprovisioning

import (
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process"
)

// Process is the deprovisioning process, by weight; Remove_Runtime runs last.
func Process(d Deps, timeout time.Duration) (*process.Process[instance.DeprovisioningData], error) {
	w := func(weight int, s process.Step[instance.DeprovisioningData]) process.WeightedStep[instance.DeprovisioningData] {
		return process.WeightedStep[instance.DeprovisioningData]{Weight: weight, StepDef: process.StepDef[instance.DeprovisioningData]{Step: s}}
	}
	return process.Weighted(instance.TypeDeprovision, timeout, w(1, Initialization{d}), w(10, RemoveRuntime{d}))
}
