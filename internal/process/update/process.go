package update

import (
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
)

// Process is the update process, by weight.
func Process(d Deps, timeout time.Duration) (*engine.Process[instance.UpdateData], error) {
	w := func(weight int, s engine.Step[instance.UpdateData]) engine.WeightedStep[instance.UpdateData] {
		return engine.WeightedStep[instance.UpdateData]{Weight: weight, StepDef: engine.StepDef[instance.UpdateData]{Step: s}}
	}
	return engine.Weighted(instance.TypeUpdate, timeout, w(10, UpgradeShoot{d}), w(15, UpdateKymaModules{d}), w(20, UpdateInstance{d}))
}
