// Package definitions assembles the broker's processes (provisioning, deprovisioning,
// suspension, update, Kyma and cluster upgrades) from their steps, for cmd/broker and for tests
// that run the broker.
package definitions

import (
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/deprovisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/kyma-project/kyma-environment-broker/internal/process/update"
	"github.com/kyma-project/kyma-environment-broker/internal/process/upgrade"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Deps are what the broker's steps need.
type Deps struct {
	Store        storage.Store
	Provisioner  client.Client
	PollInterval time.Duration
	Runtime      provisioning.RuntimeDefaults
	// Systems are the external systems (nil ones disabled) and Overrides the configured defaults.
	Systems   systems.Systems
	Overrides overrides.Defaults
	// Timeout is each operation's deadline; UpgradeTimeout an upgrade's.
	Timeout        time.Duration
	UpgradeTimeout time.Duration
	// Limits bound the steps that call external systems.
	Limits provisioning.Limits
}

// Broker returns the broker's process definitions.
func Broker(d Deps) ([]engine.Definition, error) {
	if d.Systems.RetryTime <= 0 {
		d.Systems.RetryTime = 10 * time.Minute
	}
	if d.Systems.CleanupRetryTime <= 0 {
		d.Systems.CleanupRetryTime = 5 * time.Minute
	}
	if d.UpgradeTimeout <= 0 {
		d.UpgradeTimeout = 3 * time.Hour
	}
	prov, err := provisioning.Process(provisioning.Deps{
		// Create_Runtime's runtime ID and Check_Runtime's dashboard ride on the operation's writes.
		Instances: engine.DeferringInstances{Instances: d.Store.Instances()}, Provisioner: d.Provisioner, PollInterval: d.PollInterval, Defaults: d.Runtime,
		Systems: d.Systems, Overrides: d.Overrides,
	}, d.Timeout, d.Limits)
	if err != nil {
		return nil, err
	}
	deprovDeps := deprovisioning.Deps{Instances: d.Store.Instances(), Operations: d.Store.Operations(), Provisioner: d.Provisioner, PollInterval: d.PollInterval, Systems: d.Systems}
	deprov, err := deprovisioning.Process(deprovDeps, d.Timeout, d.Limits.CallTimeout)
	if err != nil {
		return nil, err
	}
	suspension, err := deprovisioning.SuspensionProcess(deprovDeps, d.Timeout, d.Limits.CallTimeout)
	if err != nil {
		return nil, err
	}
	upd, err := update.Process(update.Deps{
		Instances: d.Store.Instances(), Provisioner: d.Provisioner, PollInterval: d.PollInterval,
		Operations: d.Store.Operations(), DefaultComponents: d.Runtime.Components,
	}, d.Timeout)
	if err != nil {
		return nil, err
	}
	upDeps := upgrade.Deps{
		Instances: d.Store.Instances(), Operations: d.Store.Operations(), Provisioner: d.Provisioner, PollInterval: d.PollInterval,
		Defaults: d.Runtime, Systems: d.Systems, Overrides: d.Overrides,
	}
	kyma, err := upgrade.KymaProcess(upDeps, d.UpgradeTimeout, d.Limits.CallTimeout)
	if err != nil {
		return nil, err
	}
	cluster, err := upgrade.ClusterProcess(upDeps, d.UpgradeTimeout)
	if err != nil {
		return nil, err
	}
	return []engine.Definition{prov, deprov, suspension, upd, kyma, cluster}, nil
}

// Register adds definitions to an engine.
func Register(e *engine.Engine, defs []engine.Definition) error {
	for _, d := range defs {
		if err := e.Register(d); err != nil {
			return err
		}
	}
	return nil
}
