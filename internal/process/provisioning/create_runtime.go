package provisioning

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// CreateRuntime asks the provisioner for the runtime. The operation ID is the request's
// idempotency key, so a repeat after a crash gets the same runtime back.
type CreateRuntime struct {
	Deps
	// RetryTime bounds retries of transient provisioner errors.
	RetryTime time.Duration
}

func (CreateRuntime) Name() string { return "Create_Runtime" }

func (s CreateRuntime) Run(ctx context.Context, op Op, log logrus.FieldLogger) (Op, time.Duration, error) {
	if op.Data.ProvisionerOperationID == "" {
		st, err := s.Provisioner.ProvisionRuntime(ctx, op.Data.Context.GlobalAccountID, *op.Data.RuntimeInput)
		if err != nil {
			if apperr.CodeOf(err) == apperr.CodeBadRequest {
				return op, 0, fmt.Errorf("the provisioner rejected the runtime: %w", err)
			}
			return op.RetryOperation(fmt.Sprintf("calling the provisioner: %v", err), s.PollInterval, s.RetryTime)
		}
		op.Data.RuntimeID, op.Data.ProvisionerOperationID = *st.RuntimeID, *st.ID
		log.WithField("runtime_id", op.Data.RuntimeID).Info("runtime requested")
	}
	// Also on a rerun after the request was accepted: the previous run may have failed to store
	// the runtime ID, and without it deprovisioning would not remove the runtime.
	if _, err := storage.ModifyInstance(ctx, s.Instances, op.InstanceID, func(i *storage.Instance) { i.RuntimeID = op.Data.RuntimeID }); err != nil {
		return op.RetryOperation(fmt.Sprintf("storing the runtime ID: %v", err), s.PollInterval, s.RetryTime)
	}
	op.LastError = ""
	return op, 0, nil
}
