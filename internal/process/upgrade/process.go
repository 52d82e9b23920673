package upgrade

import (
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
)

// KymaProcess is the Kyma upgrade of seed 001, by weight. Kyma 2.x goes through the reconciler
// (Get_Kubeconfig, Apply_Cluster_Configuration), older versions through the provisioner
// (Upgrade_Runtime).
func KymaProcess(d Deps, timeout, callTimeout time.Duration) (*engine.Process[instance.UpgradeKymaData], error) {
	sys := d.Systems
	reconciled := func(op KymaOp) bool { return sys.Reconciler != nil && provisioning.Kyma2(op.Data.KymaVersion) }
	w := func(weight int, s engine.Step[instance.UpgradeKymaData], cond func(KymaOp) bool) engine.WeightedStep[instance.UpgradeKymaData] {
		// The initialisation (reads of the broker's own database) and the configured overrides
		// call nothing outside: local (engine.StepDef.Local). Get_Kubeconfig only reads the
		// runtime's kubeconfig: read-only (engine.StepDef.ReadOnly).
		sd := engine.StepDef[instance.UpgradeKymaData]{Step: s, Condition: cond, RunTimeout: callTimeout}
		switch s.(type) {
		case KymaInitialisation, Overrides:
			sd.Local = true
		case GetKubeconfig:
			sd.ReadOnly = true
		}
		return engine.WeightedStep[instance.UpgradeKymaData]{Weight: weight, StepDef: sd}
	}
	smOn := func(op KymaOp) bool {
		_, ok := sys.SMCredentials(op.Secrets)
		return ok
	}
	return engine.Weighted(instance.TypeUpgradeKyma, timeout,
		w(1, KymaInitialisation{d}, nil),
		w(2, ProvisionEMS{d}, smOn),
		w(3, DeprovisionEventHubs{d}, func(op KymaOp) bool { return sys.EventHubs != nil && provisioning.Kyma2(op.Data.KymaVersion) }),
		w(4, Overrides{d}, nil),
		w(10, UpgradeRuntime{d}, func(op KymaOp) bool { return !reconciled(op) }),
		w(10, GetKubeconfig{d}, reconciled),
		w(10, ApplyClusterConfiguration{d}, reconciled),
	)
}

// ClusterProcess is the cluster upgrade, by weight.
func ClusterProcess(d Deps, timeout time.Duration) (*engine.Process[instance.UpgradeClusterData], error) {
	w := func(weight int, s engine.Step[instance.UpgradeClusterData]) engine.WeightedStep[instance.UpgradeClusterData] {
		// The initialisation only reads the broker's own database: local (engine.StepDef.Local).
		_, local := s.(ClusterInitialisation)
		return engine.WeightedStep[instance.UpgradeClusterData]{Weight: weight, StepDef: engine.StepDef[instance.UpgradeClusterData]{Step: s, Local: local}}
	}
	return engine.Weighted(instance.TypeUpgradeCluster, timeout, w(1, ClusterInitialisation{d}), w(10, UpgradeCluster{d}))
}
