package upgrade

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/sirupsen/logrus"
)

// UpgradeRuntime has the provisioner install the new Kyma version with the overrides and waits for
// it; only when the provisioner installs Kyma (1.x, or no reconciler).
type UpgradeRuntime struct{ Deps }

func (UpgradeRuntime) Name() string { return "Upgrade_Runtime" }

func (s UpgradeRuntime) Run(ctx context.Context, op KymaOp, log logrus.FieldLogger) (KymaOp, time.Duration, error) {
	tenant := op.Data.GlobalAccountID
	if op.Data.ProvisionerOperationID == "" {
		resolved, err := op.Data.Overrides.Resolve(op.Secrets)
		if err != nil {
			return op, 0, err
		}
		st, err := s.Provisioner.UpgradeRuntime(ctx, tenant, op.Data.RuntimeID, gqlschema.UpgradeRuntimeInput{
			KymaConfig: provisioning.KymaConfigInput(op.Data.KymaVersion, s.Defaults.Components, op.Data.Modules, resolved),
		})
		switch {
		case apperr.CodeOf(err) == apperr.CodeBadRequest || apperr.CodeOf(err) == apperr.CodeNotFound:
			return op, 0, fmt.Errorf("the provisioner rejected the upgrade: %w", err)
		case err != nil:
			return op.RetryOperation(fmt.Sprintf("calling the provisioner: %v", err), s.PollInterval, s.Systems.RetryTime)
		}
		op.Data.ProvisionerOperationID = *st.ID
		log.WithField("provisioner_operation_id", *st.ID).Info("runtime upgrade requested")
		return op, time.Millisecond, nil
	}
	wait, err := systems.AwaitProvisioner(ctx, s.Provisioner, &op, tenant, op.Data.ProvisionerOperationID, s.PollInterval)
	return op, wait, err
}
