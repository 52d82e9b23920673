package deprovisioning

import (
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
)

// Process is the deprovisioning process of seed 001, by weight; Remove_Runtime runs last but for
// Release_Subscription, which a pool that assigns accounts adds after it.
func Process(d Deps, timeout, callTimeout time.Duration) (*engine.Process[instance.DeprovisioningData], error) {
	return weighted(instance.TypeDeprovision, d, timeout, callTimeout)
}

// SuspensionProcess removes a trial's runtime and its external resources with the same steps,
// keeping the instance.
func SuspensionProcess(d Deps, timeout, callTimeout time.Duration) (*engine.Process[instance.DeprovisioningData], error) {
	return weighted(instance.TypeSuspension, d, timeout, callTimeout)
}

func weighted(opType string, d Deps, timeout, callTimeout time.Duration) (*engine.Process[instance.DeprovisioningData], error) {
	w := func(weight int, s engine.Step[instance.DeprovisioningData], on bool) engine.WeightedStep[instance.DeprovisioningData] {
		// Initialization only reads the broker's own database: local (engine.StepDef.Local).
		_, local := s.(Initialization)
		sd := engine.StepDef[instance.DeprovisioningData]{Step: s, RunTimeout: callTimeout, Local: local}
		if !on {
			sd.Condition = func(Op) bool { return false }
		}
		return engine.WeightedStep[instance.DeprovisioningData]{Weight: weight, StepDef: sd}
	}
	sys := d.Systems
	steps := []engine.WeightedStep[instance.DeprovisioningData]{
		w(1, Initialization{d}, true),
		w(2, DeprovisionEventHubs{d}, sys.EventHubs != nil),
		w(2, DeprovisionEMS{d}, sys.ServiceManager != nil),
		w(2, DeprovisionAVS{d}, sys.AVS != nil),
		w(2, IASDeregistration{d}, sys.IAS != nil),
		w(2, EDPDeregistration{d}, sys.EDP != nil),
		w(5, DeregisterCluster{d}, sys.Reconciler != nil),
		w(10, RemoveRuntime{d}, true),
	}
	// A pool that assigns accounts (Gardener's) gets them back once the runtime is gone.
	if sys.AccountPool != nil && !sys.AccountPool.Stateless() {
		steps = append(steps, w(11, ReleaseSubscription{d}, true))
	}
	return engine.Weighted(opType, timeout, steps...)
}
