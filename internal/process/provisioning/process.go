package provisioning

import (
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
)

// Stage names of seed 001.
const (
	StageCreateRuntime = "create_runtime"
	StageCheckRuntime  = "check_runtime"
	StageCreateKyma    = "create_kyma"
	StagePostActions   = "post_actions"
)

// Limits bound the steps that call external systems.
type Limits struct {
	// CallTimeout bounds one run of a step that calls an external system (the clients retry
	// transient failures inside it).
	CallTimeout time.Duration
	// ReconcileTimeout bounds Check_Cluster_Configuration.
	ReconcileTimeout time.Duration
}

// Process is the provisioning process of seed 001. Steps of disabled systems are skipped
// (recorded as such); create_kyma runs only for Kyma 2.x.
func Process(d Deps, timeout time.Duration, limits Limits) (*engine.Process[instance.ProvisioningData], error) {
	type def = engine.StepDef[instance.ProvisioningData]
	step := func(s engine.Step[instance.ProvisioningData], cond func(Op) bool) def {
		return def{Step: s, Condition: cond, RunTimeout: limits.CallTimeout}
	}
	sys := d.Systems
	avsOn := func(Op) bool { return sys.AVS != nil }
	iasOn := func(Op) bool { return sys.IAS != nil }
	smOn := func(op Op) bool {
		_, ok := sys.SMCredentials(op.Secrets)
		return ok
	}
	kyma2 := d.ReconcilerInstalls
	// Steps declared local, read-only or idempotent have no durable write of their own (the
	// engine's rules, docs/contributor/step-engine.md). Local: they only compute from the
	// operation and the configuration. Read-only: they read a status or a kubeconfig and keep it.
	// Idempotent: EDP's data tenant is named after the subaccount and its "already exists" is
	// done, its metadata set by key; AVS adds a tag the evaluation has as a no-op.
	// Resolve_Target_Secret is local on a stateless pool (the list); on Gardener's it claims a
	// binding by a label, and what it resolved is written before the next step runs, so that
	// Release_Subscription of the tenant's other instances sees it.
	resolve := step(ResolveTargetSecret{d}, nil)
	if sys.AccountPool == nil || sys.AccountPool.Stateless() {
		resolve = resolve.AsLocal()
	}
	checkCluster := step(CheckClusterConfiguration{d}, kyma2).AsReadOnly()
	checkCluster.Timeout = limits.ReconcileTimeout
	return engine.Staged(instance.TypeProvision, timeout,
		engine.Stage[instance.ProvisioningData]{Name: StageCreateRuntime, Steps: []def{
			step(Initialization{d}, nil).AsLocal(),
			resolve,
			step(AVSInternalEval{d}, avsOn),
			step(IASRegistration{d}, iasOn),
			step(EDPRegistration{d}, func(Op) bool { return sys.EDP != nil }).AsIdempotent(),
			step(ProvisionEventHubs{d}, func(op Op) bool {
				return sys.EventHubs != nil && op.Data.Provider == "azure" && !Kyma2(op.Data.KymaVersion)
			}),
			step(ProvisionEMS{d}, smOn),
			step(OverridesFromConfig{d}, nil).AsLocal(),
			step(ServiceManagerOverrides{d}, smOn).AsLocal(),
			step(CreateRuntime{Deps: d, RetryTime: 10 * time.Minute}, nil),
		}},
		engine.Stage[instance.ProvisioningData]{Name: StageCheckRuntime, Steps: []def{step(CheckRuntime{d}, nil).AsReadOnly()}},
		engine.Stage[instance.ProvisioningData]{Name: StageCreateKyma, Steps: []def{
			step(GetKubeconfig{d}, kyma2).AsReadOnly(), step(CreateClusterConfiguration{d}, kyma2), checkCluster,
		}},
		engine.Stage[instance.ProvisioningData]{Name: StagePostActions, Steps: []def{
			step(AVSExternalEval{d}, avsOn), step(AVSTags{d}, avsOn).AsIdempotent(), step(IASType{d}, iasOn),
		}},
	)
}
