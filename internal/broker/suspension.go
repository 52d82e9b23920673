package broker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/pivotal-cf/brokerapi/v10/domain/apiresponses"
)

// suspendOrResume handles a trial's context.active: false removes the runtime and keeps the
// instance (suspension), true provisions a new runtime for a suspended instance. It reports
// whether it handled the request; an active flag that changes nothing is left to Update.
func (b *Broker) suspendOrResume(ctx context.Context, inst storage.Instance, active, asyncAllowed bool) (domain.UpdateServiceSpec, bool, error) {
	log := b.logFor(ctx, inst.InstanceID)
	last, ok, err := b.latestOperation(ctx, inst.InstanceID, instance.TypeProvision, instance.TypeSuspension)
	if err != nil || !ok {
		return domain.UpdateServiceSpec{}, false, err
	}
	suspended := last.Type == instance.TypeSuspension
	if active != suspended {
		return domain.UpdateServiceSpec{}, false, nil // already as asked
	}
	if !asyncAllowed {
		return domain.UpdateServiceSpec{}, true, apiresponses.ErrAsyncRequired
	}
	if _, ok, err := b.activeOperation(ctx, inst.InstanceID); err != nil {
		return domain.UpdateServiceSpec{}, true, internal(log, actionUpdate, err)
	} else if ok {
		return domain.UpdateServiceSpec{}, true, apiresponses.ErrConcurrentInstanceAccess
	}
	var op storage.Operation
	if active {
		op, err = b.resumption(ctx, inst)
	} else {
		op, err = engine.NewOperation(instance.TypeSuspension, inst.InstanceID, instance.DeprovisioningData{GlobalAccountID: inst.GlobalAccountID}, b.cfg.OperationTimeout, b.now())
	}
	if err != nil {
		return domain.UpdateServiceSpec{}, true, internal(log, actionUpdate, err)
	}
	if op, err = b.store.Instances().InsertOperationExclusive(ctx, op, instance.AllTypes()); err != nil {
		return domain.UpdateServiceSpec{}, true, b.exclusiveInsertError(log, err)
	}
	log.WithField("operation_id", op.ID).WithField("operation_type", op.Type).Info("trial suspension change accepted")
	return domain.UpdateServiceSpec{IsAsync: true, OperationData: op.ID}, true, nil
}

// resumption is a new provisioning of the suspended instance: the previous provisioning's
// plan, provider and context with the instance's current parameters.
func (b *Broker) resumption(ctx context.Context, inst storage.Instance) (storage.Operation, error) {
	prev, ok, err := b.latestOperation(ctx, inst.InstanceID, instance.TypeProvision)
	if err != nil || !ok {
		return storage.Operation{}, fmt.Errorf("finding the provisioning of %s: %w", inst.InstanceID, err)
	}
	var old instance.ProvisioningData
	if err := json.Unmarshal(prev.Data, &old); err != nil {
		return storage.Operation{}, fmt.Errorf("decoding the provisioning of %s: %w", inst.InstanceID, err)
	}
	// Only what the platform asked for carries over: everything the previous run's steps
	// recorded (runtime, external resources, overrides) belongs to the removed runtime.
	data := instance.ProvisioningData{
		ServiceID: old.ServiceID, PlanID: old.PlanID, PlanName: old.PlanName, Provider: old.Provider,
		PlatformRegion: old.PlatformRegion, Context: old.Context,
	}
	if err := json.Unmarshal(inst.Parameters, &data.Parameters); err != nil {
		return storage.Operation{}, fmt.Errorf("decoding the parameters of %s: %w", inst.InstanceID, err)
	}
	op, err := engine.NewOperation(instance.TypeProvision, inst.InstanceID, data, b.cfg.OperationTimeout, b.now())
	if c, ok := instance.SMCredentialsFrom(prev.Secrets); ok && err == nil {
		c.Put(&op.Secrets)
	}
	return op, err
}
