package operations

import (
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/config"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
)

// Stage names of the Compass Runtime Provisioner.
const (
	StageWaitingForClusterDomain      = "WaitingForClusterDomain"
	StageWaitingForClusterCreation    = "WaitingForClusterCreation"
	StageCreatingBindingsForOperators = "CreatingBindingsForOperators"
	StageStartingInstallation         = "StartingInstallation"
	StageWaitingForInstallation       = "WaitingForInstallation"
	StageConnectRuntimeAgent          = "ConnectRuntimeAgent"
	StageWaitForAgentToConnect        = "WaitForAgentToConnect"
	StageCleanupCluster               = "CleanupCluster"
	StageDeprovisionCluster           = "DeprovisionCluster"
	StageWaitForClusterDeletion       = "WaitForClusterDeletion"
	StageWaitingForShootNewVersion    = "WaitingForShootNewVersion"
	StageWaitingForShootUpgrade       = "WaitingForShootUpgrade"
	StageStartingUpgrade              = "StartingUpgrade"
	StageUpgradingRuntime             = "UpgradingRuntime"
	StageUpdatingUpgradeState         = "UpdatingUpgradeState"
	StageStartingHibernation          = "StartingHibernation"
	StageWaitingForHibernation        = "WaitingForHibernation"
)

// cleanupRetryTime is how long Cleanup_Cluster retries before giving up without failing: at
// most 5 minutes, and well inside the stage's own limit so the limit never fails the
// deprovisioning first.
func cleanupRetryTime(stageLimit time.Duration) time.Duration {
	return min(5*time.Minute, stageLimit*3/4)
}

func stage(name string, timeout time.Duration, steps ...engine.StepDef[Data]) engine.Stage[Data] {
	return engine.Stage[Data]{Name: name, Timeout: timeout, Steps: steps}
}

func step(s engine.Step[Data]) engine.StepDef[Data] { return engine.StepDef[Data]{Step: s} }

func withKyma(d Deps, s engine.Step[Data]) engine.StepDef[Data] {
	return engine.StepDef[Data]{Step: s, Condition: func(op Op) bool { return HasKyma(op) && (OwnCluster(op) || modulesInNamespace(d, op)) }}
}

// modulesInNamespace: a runtime that is a namespace of its own on a shared host (kubernetes
// backend) gets Kyma, in that namespace, when it requests modules and the provisioner installs
// them (a module catalog is configured): nothing else would make its Kyma resource Ready.
func modulesInNamespace(d Deps, op Op) bool {
	return op.Data.Namespace != "" && len(op.Data.Config.Kyma.Components) > 0 && runtimeclient.InstallsModulesInNamespaces(d.Clusters)
}

// OwnCluster: the runtime is a cluster of its own (gardener, simulated), not a namespace of a
// shared host (static, kubernetes: their backends allocate). Installing Kyma and connecting the
// Runtime Agent need a cluster of their own; for the others these steps are skipped.
func OwnCluster(op Op) bool { return !op.Data.Allocated }

func ownCluster(s engine.Step[Data]) engine.StepDef[Data] {
	return engine.StepDef[Data]{Step: s, Condition: OwnCluster}
}

// Definitions are the provisioner's processes with the configured per-stage time limits.
// Waits that only read (a cluster's status, a CompassConnection) and keep what they read in the
// provisioner's own records are read-only; Wait_For_Cluster_Domain (the Director's labels) and
// Create_Bindings_For_Operators (bindings named after the administrators, "already exists" is
// done) are idempotent: neither kind has a write of its own (engine.StepDef).
func Definitions(d Deps, cfg config.Config) ([]engine.Definition, error) {
	p, dp := cfg.Provisioning, cfg.Deprovisioning
	agentStages := []engine.Stage[Data]{
		stage(StageConnectRuntimeAgent, p.AgentConfiguration, ownCluster(ConnectRuntimeAgent{d})),
		stage(StageWaitForAgentToConnect, p.AgentConnection, ownCluster(WaitForAgentToConnect{d}).AsReadOnly()),
	}
	defs := []struct {
		opType string
		stages []engine.Stage[Data]
	}{
		{TypeProvision, append([]engine.Stage[Data]{
			stage(StageWaitingForClusterDomain, p.ClusterDomains, step(RegisterRuntime{d}), step(CreateCluster{d}), step(WaitForClusterDomain{d}).AsIdempotent()),
			stage(StageWaitingForClusterCreation, p.ClusterCreation, step(WaitForClusterCreation{d}).AsReadOnly()),
			stage(StageCreatingBindingsForOperators, p.BindingsCreation, step(CreateBindingsForOperators{d}).AsIdempotent()),
			stage(StageStartingInstallation, p.InstallationTriggering, withKyma(d, StartInstallation{Deps: d, StepName: "Start_Installation"})),
			stage(StageWaitingForInstallation, p.Installation, withKyma(d, WaitForInstallation{Deps: d, StepName: "Wait_For_Installation"}).AsReadOnly()),
		}, agentStages...)},
		{TypeDeprovision, []engine.Stage[Data]{
			stage(StageCleanupCluster, dp.ClusterCleanup, step(CleanupCluster{Deps: d, RetryTime: cleanupRetryTime(dp.ClusterCleanup)})),
			stage(StageDeprovisionCluster, dp.ClusterDeletion, step(DeprovisionCluster{d})),
			stage(StageWaitForClusterDeletion, dp.WaitingForClusterDeletion, step(WaitForClusterDeletion{d})),
		}},
		{TypeUpgradeShoot, []engine.Stage[Data]{
			stage(StageWaitingForShootNewVersion, p.UpgradeTriggering, step(UpgradeShoot{d})),
			stage(StageWaitingForShootUpgrade, p.ShootUpgrade, step(WaitForShootUpgrade{d}).AsReadOnly()),
		}},
		{TypeUpgradeRuntime, []engine.Stage[Data]{
			stage(StageStartingUpgrade, p.UpgradeTriggering, step(StartInstallation{Deps: d, StepName: "Start_Upgrade"})),
			stage(StageUpgradingRuntime, p.Upgrade, step(WaitForInstallation{Deps: d, StepName: "Wait_For_Upgrade"}).AsReadOnly()),
			stage(StageUpdatingUpgradeState, p.UpgradeTriggering, step(UpdateUpgradeState{d})),
		}},
		{TypeHibernate, []engine.Stage[Data]{
			stage(StageStartingHibernation, p.UpgradeTriggering, step(HibernateCluster{d})),
			stage(StageWaitingForHibernation, p.Hibernation, step(WaitForHibernation{d}).AsReadOnly()),
		}},
		{TypeReconnect, agentStages},
	}
	out := make([]engine.Definition, 0, len(defs))
	for _, def := range defs {
		proc, err := engine.Staged(def.opType, cfg.OperationTimeout, def.stages...)
		if err != nil {
			return nil, fmt.Errorf("defining provisioner process %s: %w", def.opType, err)
		}
		out = append(out, proc)
	}
	return out, nil
}
