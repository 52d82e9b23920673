package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/pivotal-cf/brokerapi/v10/domain/apiresponses"
)

const actionDeprovision = "deprovision"

func (b *Broker) Deprovision(ctx context.Context, instanceID string, details domain.DeprovisionDetails, asyncAllowed bool) (domain.DeprovisionServiceSpec, error) {
	log := b.logFor(ctx, instanceID)
	if !asyncAllowed {
		return domain.DeprovisionServiceSpec{}, apiresponses.ErrAsyncRequired
	}
	inst, err := b.liveInstance(ctx, instanceID)
	if errors.Is(err, storage.ErrNotFound) {
		return domain.DeprovisionServiceSpec{}, apiresponses.ErrInstanceDoesNotExist
	}
	if err != nil {
		return domain.DeprovisionServiceSpec{}, internal(log, actionDeprovision, err)
	}
	if err := belongs(inst, details.ServiceID, details.PlanID); err != nil {
		return domain.DeprovisionServiceSpec{}, badRequest(actionDeprovision, "%v", err)
	}
	// The deprovisioning waits in its first step for a provisioning or update still running;
	// a repeat (also concurrent, also on another replica) gets the running deprovisioning.
	op, err := engine.NewOperation(instance.TypeDeprovision, instanceID, instance.DeprovisioningData{GlobalAccountID: inst.GlobalAccountID}, b.cfg.OperationTimeout, b.now())
	if err != nil {
		return domain.DeprovisionServiceSpec{}, internal(log, actionDeprovision, err)
	}
	op, err = b.store.Instances().InsertOperationExclusive(ctx, op, []string{instance.TypeDeprovision})
	var running *storage.InProgressError
	if errors.As(err, &running) {
		return domain.DeprovisionServiceSpec{IsAsync: true, OperationData: running.Operation.ID}, nil
	}
	if err != nil {
		return domain.DeprovisionServiceSpec{}, internal(log, actionDeprovision, err)
	}
	log.WithField("operation_id", op.ID).Info("deprovisioning accepted")
	return domain.DeprovisionServiceSpec{IsAsync: true, OperationData: op.ID}, nil
}

// belongs checks the service_id and plan_id a platform sent with a request on an existing
// instance (OSB: both are required on DELETE): they must be the instance's own.
func belongs(inst storage.Instance, serviceID, planID string) error {
	if serviceID != inst.ServiceID {
		return fmt.Errorf("service_id: %q is not the service of instance %s", serviceID, inst.InstanceID)
	}
	if planID != inst.PlanID {
		return fmt.Errorf("plan_id: %q is not the plan of instance %s", planID, inst.InstanceID)
	}
	return nil
}
