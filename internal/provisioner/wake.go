package provisioner

import (
	"context"

	"github.com/sirupsen/logrus"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/operations"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// WakeWaiters returns store with one addition for the engine that runs the embedded
// provisioner's operations: once such an operation is saved finished (succeeded or failed), the
// waiting operations of the instance whose runtime it is (the broker's provisioning,
// deprovisioning, update or upgrade polling it) are made due at once, instead of at their next
// poll, which for a long wait has backed off. The wake follows the commit, so the woken
// operation reads the finished state. A failed wake is logged: the poll still runs. A broker
// operation parked in memory on the operation's client.FinishedSignal (signals, the broker's
// engine's; nil for none) goes on at once, and then nothing is written: an operation waits for
// the provisioner's operation it requested, so no other waits for this one.
func WakeWaiters(store storage.Store, log logrus.FieldLogger, signals *engine.Signals) storage.Store {
	return wakingStore{Store: store, ops: wakingOperations{Operations: store.Operations(), log: log, signals: signals}}
}

// NewEngine builds the engine that runs the broker's operations (and an embedded provisioner's)
// on store through WakeWaiters, with the signals that let those waiting for the provisioner
// wait in memory.
func NewEngine(store storage.Store, cfg engine.Config, log logrus.FieldLogger, opts ...engine.Option) (*engine.Engine, error) {
	signals := engine.NewSignals()
	return engine.New(WakeWaiters(store, log, signals), cfg, log, append(opts, engine.WithSignals(signals))...)
}

type wakingStore struct {
	storage.Store
	ops wakingOperations
}

func (s wakingStore) Operations() storage.Operations { return s.ops }

type wakingOperations struct {
	storage.Operations
	log     logrus.FieldLogger
	signals *engine.Signals
}

func (o wakingOperations) SaveProgress(ctx context.Context, op storage.Operation, with storage.Save, events []storage.Event) (storage.Operation, error) {
	saved, err := o.Operations.SaveProgress(ctx, op, with, events)
	if err != nil || !operations.IsType(saved.Type) || saved.State.Active() {
		return saved, err
	}
	if o.signals.Signal(client.FinishedSignal(saved.ID)) {
		return saved, err
	}
	woken, werr := o.Wake(ctx, storage.WakeRequest{RuntimeIDs: []string{saved.InstanceID}, Now: saved.UpdatedAt})
	if werr != nil {
		o.log.WithError(werr).WithFields(logrus.Fields{"operation_id": saved.ID, "runtime_id": saved.InstanceID}).
			Warn("waking the operations that wait for the provisioner; they find its answer at their next poll")
	} else if len(woken) > 0 {
		o.log.WithFields(logrus.Fields{"operation_id": saved.ID, "runtime_id": saved.InstanceID, "woken": woken}).
			Debug("provisioner operation finished: woke the operations waiting for it")
	}
	return saved, err
}
