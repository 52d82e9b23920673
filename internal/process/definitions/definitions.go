// Package definitions assembles the broker's processes (provisioning, deprovisioning,
// suspension, update) from their steps, for cmd/broker and for tests that run the broker.
package definitions

import (
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/process"
	"github.com/kyma-project/kyma-environment-broker/internal/process/deprovisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/update"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Deps are what the broker's steps need.
type Deps struct {
	Store        storage.Store
	Provisioner  client.Client
	PollInterval time.Duration
	Runtime      provisioning.RuntimeDefaults
	// Timeout is each operation's deadline.
	Timeout time.Duration
}

// Broker returns the broker's process definitions.
func Broker(d Deps) ([]process.Definition, error) {
	prov, err := provisioning.Process(provisioning.Deps{
		Instances: d.Store.Instances(), Provisioner: d.Provisioner, PollInterval: d.PollInterval, Defaults: d.Runtime,
	}, d.Timeout)
	if err != nil {
		return nil, err
	}
	deprovDeps := deprovisioning.Deps{Instances: d.Store.Instances(), Operations: d.Store.Operations(), Provisioner: d.Provisioner, PollInterval: d.PollInterval}
	deprov, err := deprovisioning.Process(deprovDeps, d.Timeout)
	if err != nil {
		return nil, err
	}
	suspension, err := deprovisioning.SuspensionProcess(deprovDeps, d.Timeout)
	if err != nil {
		return nil, err
	}
	upd, err := update.Process(update.Deps{Instances: d.Store.Instances(), Provisioner: d.Provisioner, PollInterval: d.PollInterval}, d.Timeout)
	if err != nil {
		return nil, err
	}
	return []process.Definition{prov, deprov, suspension, upd}, nil
}

// Register adds definitions to an engine.
func Register(e *process.Engine, defs []process.Definition) error {
	for _, d := range defs {
		if err := e.Register(d); err != nil {
			return err
		}
	}
	return nil
}
