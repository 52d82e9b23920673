package update

import (
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process"
)

// Process is the update process, by weight.
func Process(d Deps, timeout time.Duration) (*process.Process[instance.UpdateData], error) {
	w := func(weight int, s process.Step[instance.UpdateData]) process.WeightedStep[instance.UpdateData] {
		return process.WeightedStep[instance.UpdateData]{Weight: weight, StepDef: process.StepDef[instance.UpdateData]{Step: s}}
	}
	return process.Weighted(instance.TypeUpdate, timeout, w(10, UpgradeShoot{d}), w(20, UpdateInstance{d}))
}
