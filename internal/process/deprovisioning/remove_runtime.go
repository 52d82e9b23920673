package deprovisioning

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// RemoveRuntime has the provisioner deprovision the runtime, waits for it, and archives the
// instance (kept, so last_operation keeps answering); a suspension keeps the instance live
// without a runtime instead. It runs last.
type RemoveRuntime struct{ Deps }

func (RemoveRuntime) Name() string { return "Remove_Runtime" }

func (s RemoveRuntime) Run(ctx context.Context, op Op, log logrus.FieldLogger) (Op, time.Duration, error) {
	tenant := op.Data.GlobalAccountID
	if op.Data.RuntimeID != "" && op.Data.ProvisionerOperationID == "" {
		id, err := s.Provisioner.DeprovisionRuntime(ctx, tenant, op.Data.RuntimeID)
		switch {
		case apperr.CodeOf(err) == apperr.CodeNotFound:
			log.WithField("runtime_id", op.Data.RuntimeID).Info("runtime already gone")
			op.Data.RuntimeID = ""
		case apperr.CodeOf(err) == apperr.CodeConflict:
			op.LastError = fmt.Sprintf("the runtime is busy: %v", err)
			return op, s.PollInterval, nil
		case err != nil:
			op.LastError = fmt.Sprintf("calling the provisioner: %v", err)
			return op, s.PollInterval, nil
		default:
			op.Data.ProvisionerOperationID = id
			// Persist the ID before waiting: the next run polls instead of asking again.
			return op, time.Millisecond, nil
		}
	}
	if op.Data.ProvisionerOperationID != "" {
		if wait, err := systems.AwaitProvisioner(ctx, s.Provisioner, &op, tenant, op.Data.ProvisionerOperationID, s.PollInterval); wait > 0 || err != nil {
			return op, wait, err
		}
	}
	now := op.Now().UTC()
	suspension := op.Type == instance.TypeSuspension
	if _, err := storage.ModifyInstance(ctx, s.Instances, op.InstanceID, func(i *storage.Instance) {
		if suspension {
			i.RuntimeID = "" // the instance stays; resuming provisions a new runtime
		} else if i.DeletedAt == nil {
			i.DeletedAt = &now // a rerun keeps the time it was archived at
		}
	}); err != nil {
		op.LastError = fmt.Sprintf("archiving the instance: %v", err)
		return op, s.PollInterval, nil
	}
	if !slices.Contains(op.Progress.ExecutedButNotCompleted, op.CurrentStep()) {
		op.LastError = "" // else it says what the provisioner left behind
	}
	return op, 0, nil
}
