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
	// Local steps only compute from the operation and the configuration: no durable write of
	// their own (engine.StepDef.Local).
	local := func(s engine.Step[instance.ProvisioningData], cond func(Op) bool) def {
		sd := step(s, cond)
		sd.Local = true
		return sd
	}
	// Read-only steps read a status or a kubeconfig and keep it: no durable write of their own
	// either (engine.StepDef.ReadOnly).
	readOnly := func(s engine.Step[instance.ProvisioningData], cond func(Op) bool) def {
		sd := step(s, cond)
		sd.ReadOnly = true
		return sd
	}
	// Idempotent steps only set what a run again sets the same and keep no ID an external system
	// chose (engine.StepDef.Idempotent): EDP's data tenant is named after the subaccount and its
	// "already exists" is done, its metadata set by key; AVS adds a tag the evaluation has as a
	// no-op. No durable write of their own either.
	idempotent := func(s engine.Step[instance.ProvisioningData], cond func(Op) bool) def {
		sd := step(s, cond)
		sd.Idempotent = true
		return sd
	}
	checkCluster := readOnly(CheckClusterConfiguration{d}, kyma2)
	checkCluster.Timeout = limits.ReconcileTimeout
	return engine.Staged(instance.TypeProvision, timeout,
		engine.Stage[instance.ProvisioningData]{Name: StageCreateRuntime, Steps: []def{
			local(Initialization{d}, nil),
			local(ResolveTargetSecret{d}, nil),
			step(AVSInternalEval{d}, avsOn),
			step(IASRegistration{d}, iasOn),
			idempotent(EDPRegistration{d}, func(Op) bool { return sys.EDP != nil }),
			step(ProvisionEventHubs{d}, func(op Op) bool {
				return sys.EventHubs != nil && op.Data.Provider == "azure" && !Kyma2(op.Data.KymaVersion)
			}),
			step(ProvisionEMS{d}, smOn),
			local(OverridesFromConfig{d}, nil),
			local(ServiceManagerOverrides{d}, smOn),
			step(CreateRuntime{Deps: d, RetryTime: 10 * time.Minute}, nil),
		}},
		engine.Stage[instance.ProvisioningData]{Name: StageCheckRuntime, Steps: []def{readOnly(CheckRuntime{d}, nil)}},
		engine.Stage[instance.ProvisioningData]{Name: StageCreateKyma, Steps: []def{
			readOnly(GetKubeconfig{d}, kyma2), step(CreateClusterConfiguration{d}, kyma2), checkCluster,
		}},
		engine.Stage[instance.ProvisioningData]{Name: StagePostActions, Steps: []def{
			step(AVSExternalEval{d}, avsOn), idempotent(AVSTags{d}, avsOn), step(IASType{d}, iasOn),
		}},
	)
}
