// Package upgrade holds the steps of the operator-triggered upgrades (seed 001): of Kyma
// (upgradeKyma) and of the cluster (upgradeCluster), one file per step, ordered by weight.
package upgrade

import (
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// KymaOp is a Kyma upgrade as its steps see it; ClusterOp a cluster upgrade.
type (
	KymaOp    = engine.Operation[instance.UpgradeKymaData]
	ClusterOp = engine.Operation[instance.UpgradeClusterData]
)

// Deps are what the upgrade steps use.
type Deps struct {
	Instances    storage.Instances
	Operations   storage.Operations
	Provisioner  client.Client
	PollInterval time.Duration
	Defaults     provisioning.RuntimeDefaults
	Systems      systems.Systems
	Overrides    overrides.Defaults
}
