package broker

import (
	"context"
	"errors"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/pivotal-cf/brokerapi/v10/domain"
)

const actionLastOperation = "last_operation"

// LastOperation reports the operation named by the platform, or the instance's newest when
// none or an unknown one is named. Deprovisioned instances are archived, so a finished
// deprovisioning keeps answering 200 succeeded.
func (b *Broker) LastOperation(ctx context.Context, instanceID string, details domain.PollDetails) (domain.LastOperation, error) {
	log := b.logFor(ctx, instanceID)
	if _, err := b.store.Instances().GetInstance(ctx, instanceID); errors.Is(err, storage.ErrNotFound) {
		return domain.LastOperation{}, notFound(actionLastOperation, "instance %s does not exist", instanceID)
	} else if err != nil {
		return domain.LastOperation{}, internal(log, actionLastOperation, err)
	}
	var op storage.Operation
	found := false
	if details.OperationData != "" {
		got, err := b.store.Operations().GetOperation(ctx, details.OperationData)
		switch {
		case err == nil && got.InstanceID != instanceID:
			return domain.LastOperation{}, badRequest(actionLastOperation, "operation: %s belongs to another instance", details.OperationData)
		case err == nil:
			op, found = got, true
		case !errors.Is(err, storage.ErrNotFound):
			return domain.LastOperation{}, internal(log, actionLastOperation, err)
		}
	}
	if !found {
		latest, ok, err := b.latestOperation(ctx, instanceID, instance.TypeProvision, instance.TypeDeprovision, instance.TypeUpdate, instance.TypeSuspension)
		if err != nil {
			return domain.LastOperation{}, internal(log, actionLastOperation, err)
		}
		if !ok {
			return domain.LastOperation{}, notFound(actionLastOperation, "instance %s has no operation", instanceID)
		}
		op = latest
	}
	return lastOperation(op), nil
}

func lastOperation(op storage.Operation) domain.LastOperation {
	switch op.State {
	case storage.StateSucceeded:
		return domain.LastOperation{State: domain.Succeeded, Description: op.Description}
	case storage.StateFailed:
		return domain.LastOperation{State: domain.Failed, Description: op.LastError}
	}
	return domain.LastOperation{State: domain.InProgress, Description: op.Description}
}
