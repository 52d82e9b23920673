package broker

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/pivotal-cf/brokerapi/v10/domain/apiresponses"
	"github.com/sirupsen/logrus"
)

const actionUpdate = "update"

// exclusiveInsertError maps a refused exclusive insert to OSB: 422 ConcurrencyError, or 422
// naming the deprovisioning.
func (b *Broker) exclusiveInsertError(log logrus.FieldLogger, err error) error {
	var running *storage.InProgressError
	if !errors.As(err, &running) {
		return internal(log, actionUpdate, err)
	}
	if running.Operation.Type == instance.TypeDeprovision {
		return unprocessable(actionUpdate, "instance %s is being deprovisioned", running.Operation.InstanceID)
	}
	return apiresponses.ErrConcurrentInstanceAccess
}

// Update changes an instance's plan (along the allowed upgrades) or parameters. While another
// operation of the instance runs it answers 422 ConcurrencyError rather than queueing: the
// platform retries, and no hidden queue can pile up.
func (b *Broker) Update(ctx context.Context, instanceID string, details domain.UpdateDetails, asyncAllowed bool) (domain.UpdateServiceSpec, error) {
	log := b.logFor(ctx, instanceID)
	inst, err := b.liveInstance(ctx, instanceID)
	if errors.Is(err, storage.ErrNotFound) {
		return domain.UpdateServiceSpec{}, notFound(actionUpdate, "instance %s does not exist", instanceID)
	}
	if err != nil {
		return domain.UpdateServiceSpec{}, internal(log, actionUpdate, err)
	}
	if inst.ExpiredAt != nil {
		return domain.UpdateServiceSpec{}, unprocessable(actionUpdate, "instance %s expired at %s (its plan's lifetime is over) and cannot be updated or reactivated; deprovision it", instanceID, inst.ExpiredAt.Format(time.RFC3339))
	}
	if details.ServiceID != "" && details.ServiceID != ServiceID {
		return domain.UpdateServiceSpec{}, badRequest(actionUpdate, "service_id: unknown service %q", details.ServiceID)
	}
	// Active also checks the context: a non-object one, or IDs no step could use, are refused
	// for every plan.
	active, err := b.catalog.Active(details.RawContext)
	if err != nil {
		return domain.UpdateServiceSpec{}, badRequest(actionUpdate, "%v", err)
	}
	if plan, ok := b.catalog.Plan(inst.PlanID); ok && plan.Trial {
		if active != nil {
			if spec, handled, err := b.suspendOrResume(ctx, inst, *active, asyncAllowed); handled || err != nil {
				return spec, err
			}
		}
	}
	if prov, ok, err := b.latestOperation(ctx, instanceID, instance.TypeProvision); err != nil {
		return domain.UpdateServiceSpec{}, internal(log, actionUpdate, err)
	} else if ok && prov.State == storage.StateFailed {
		return domain.UpdateServiceSpec{}, unprocessable(actionUpdate, "instance %s failed provisioning and cannot be updated; deprovision it", instanceID)
	}
	planID := inst.PlanID
	if details.PlanID != "" && details.PlanID != inst.PlanID {
		if _, ok := b.catalog.Plan(details.PlanID); !ok {
			return domain.UpdateServiceSpec{}, badRequest(actionUpdate, "plan_id: unknown or disabled plan %q", details.PlanID)
		}
		if !b.catalog.CanUpgrade(inst.PlanID, details.PlanID) {
			return domain.UpdateServiceSpec{}, badRequest(actionUpdate, "plan_id: the plan cannot be changed from %s to %s", inst.PlanID, details.PlanID)
		}
		planID = details.PlanID
	}
	var current instance.Parameters
	if err := json.Unmarshal(inst.Parameters, &current); err != nil {
		return domain.UpdateServiceSpec{}, internal(log, actionUpdate, err)
	}
	params, err := b.catalog.ValidateUpdate(planID, current, details.RawParameters)
	if err != nil {
		return domain.UpdateServiceSpec{}, badRequest(actionUpdate, "%v", err)
	}
	newRaw, err := json.Marshal(params)
	if err != nil {
		return domain.UpdateServiceSpec{}, internal(log, actionUpdate, err)
	}
	if running, ok, err := b.activeOperation(ctx, instanceID); err != nil {
		return domain.UpdateServiceSpec{}, internal(log, actionUpdate, err)
	} else if ok {
		if running.Type == instance.TypeDeprovision {
			return domain.UpdateServiceSpec{}, unprocessable(actionUpdate, "instance %s is being deprovisioned", instanceID)
		}
		if sameUpdate(running, planID, newRaw) {
			// OSB 2.17: a repeat of the update in progress gets 202 with that operation.
			return domain.UpdateServiceSpec{IsAsync: true, OperationData: running.ID, DashboardURL: inst.DashboardURL}, nil
		}
		return domain.UpdateServiceSpec{}, apiresponses.ErrConcurrentInstanceAccess
	}
	if planID == inst.PlanID && sameJSON(newRaw, inst.Parameters) {
		// Nothing to change on the runtime (e.g. a context-only update).
		return domain.UpdateServiceSpec{DashboardURL: inst.DashboardURL}, nil
	}
	if !asyncAllowed {
		return domain.UpdateServiceSpec{}, apiresponses.ErrAsyncRequired
	}
	data := instance.UpdateData{GlobalAccountID: inst.GlobalAccountID, RuntimeID: inst.RuntimeID, PlanID: planID, Parameters: params}
	op, err := engine.NewOperation(instance.TypeUpdate, instanceID, data, b.cfg.OperationTimeout, b.now())
	if err != nil {
		return domain.UpdateServiceSpec{}, internal(log, actionUpdate, err)
	}
	// The checks above answer most requests; this insert is the guarantee (across replicas).
	if op, err = b.store.Instances().InsertOperationExclusive(ctx, op, instance.AllTypes()); err != nil {
		return domain.UpdateServiceSpec{}, b.exclusiveInsertError(log, err)
	}
	log.WithField("operation_id", op.ID).Info("update accepted")
	return domain.UpdateServiceSpec{IsAsync: true, OperationData: op.ID, DashboardURL: inst.DashboardURL}, nil
}

// sameUpdate tells whether op is an update to planID with the parameters params.
func sameUpdate(op storage.Operation, planID string, params []byte) bool {
	if op.Type != instance.TypeUpdate {
		return false
	}
	var data instance.UpdateData
	if err := json.Unmarshal(op.Data, &data); err != nil || data.PlanID != planID {
		return false
	}
	raw, err := json.Marshal(data.Parameters)
	return err == nil && sameJSON(raw, params)
}
