package provisioner

import (
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// EngineConfig is the engine configuration for the provisioner's operations in a process that
// starts at start: with APP_ENQUEUE_IN_PROGRESS_OPERATIONS=false (seed 000) the engine runs
// only operations created from start on, so operations found in progress at start-up are not
// picked up by this process (another replica, or a later start with true, continues them);
// new ones are.
func (p *Provisioner) EngineConfig(base engine.Config, start time.Time) engine.Config {
	if !p.cfg.EnqueueInProgressOperations {
		base.OnlyCreatedAfter = start
	}
	return base
}

// Embed puts the provisioner's processes on the broker's engine shared, or, with
// APP_ENQUEUE_IN_PROGRESS_OPERATIONS=false, on an engine of their own that it returns for the
// caller to run: that engine leaves the provisioner's operations in progress at start-up alone
// while the broker's engine goes on with all of the broker's (the setting is the provisioner's,
// not the broker's). base is the broker's engine configuration; the provisioner's engine owns
// its leases as "<owner>/provisioner" and has no metrics of its own.
func (p *Provisioner) Embed(shared *engine.Engine, store storage.Store, base engine.Config, start time.Time, log logrus.FieldLogger) (*engine.Engine, error) {
	if p.cfg.EnqueueInProgressOperations {
		return nil, p.Register(shared)
	}
	cfg := p.EngineConfig(base, start)
	cfg.Owner = shared.Owner() + "/provisioner"
	own, err := engine.New(WakeWaiters(store, log, shared.Signals()), cfg, log.WithField("component", "provisioner"))
	if err != nil {
		return nil, fmt.Errorf("building the provisioner's engine: %w", err)
	}
	if err := p.Register(own); err != nil {
		return nil, err
	}
	log.Info("APP_ENQUEUE_IN_PROGRESS_OPERATIONS=false: the provisioner's operations in progress before this start are left to other replicas")
	return own, nil
}
