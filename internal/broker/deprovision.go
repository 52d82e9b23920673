package broker

import (
	"context"
	"errors"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/pivotal-cf/brokerapi/v10/domain/apiresponses"
)

const actionDeprovision = "deprovision"

func (b *Broker) Deprovision(ctx context.Context, instanceID string, _ domain.DeprovisionDetails, asyncAllowed bool) (domain.DeprovisionServiceSpec, error) {
	log := b.logFor(ctx, instanceID)
	if !asyncAllowed {
		return domain.DeprovisionServiceSpec{}, apiresponses.ErrAsyncRequired
	}
	inst, err := b.store.Instances().GetInstance(ctx, instanceID)
	if errors.Is(err, storage.ErrNotFound) || (err == nil && inst.DeletedAt != nil) {
		return domain.DeprovisionServiceSpec{}, apiresponses.ErrInstanceDoesNotExist
	}
	if err != nil {
		return domain.DeprovisionServiceSpec{}, internal(log, actionDeprovision, err)
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
