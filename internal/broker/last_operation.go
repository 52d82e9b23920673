package broker

import (
	"context"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/pivotal-cf/brokerapi/v10/domain"
)

const actionLastOperation = "last_operation"

// lastOperationTypes are the operations a platform asks last_operation about.
var lastOperationTypes = []string{instance.TypeProvision, instance.TypeDeprovision, instance.TypeUpdate, instance.TypeSuspension}

// LastOperation reports the operation named by the platform, or the instance's newest when
// none or an unknown one is named. Deprovisioned instances are archived, so a finished
// deprovisioning keeps answering 200 succeeded. Platforms poll it: it is one lean read (no
// payload decoding, no secret decryption), and the logger is built only on failure.
func (b *Broker) LastOperation(ctx context.Context, instanceID string, details domain.PollDetails) (domain.LastOperation, error) {
	read, err := b.store.Operations().ReadLastOperation(ctx, instanceID, details.OperationData, lastOperationTypes)
	if err != nil {
		return domain.LastOperation{}, internal(b.logFor(ctx, instanceID), actionLastOperation, err)
	}
	if !read.InstanceExists {
		return domain.LastOperation{}, notFound(actionLastOperation, "instance %s does not exist", instanceID)
	}
	op := read.Named
	if op != nil && op.InstanceID != instanceID {
		return domain.LastOperation{}, badRequest(actionLastOperation, "operation: %s belongs to another instance", details.OperationData)
	}
	if op == nil {
		op = read.Newest
	}
	if op == nil {
		return domain.LastOperation{}, notFound(actionLastOperation, "instance %s has no operation", instanceID)
	}
	return lastOperation(*op), nil
}

func lastOperation(op storage.OperationStatus) domain.LastOperation {
	switch op.State {
	case storage.StateSucceeded:
		return domain.LastOperation{State: domain.Succeeded, Description: op.Description}
	case storage.StateFailed:
		return domain.LastOperation{State: domain.Failed, Description: op.LastError}
	}
	return domain.LastOperation{State: domain.InProgress, Description: op.Description}
}
