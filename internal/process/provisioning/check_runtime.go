package provisioning

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// CheckRuntime waits for the provisioner to finish the runtime, then gives the instance its
// dashboard URL.
type CheckRuntime struct{ Deps }

func (CheckRuntime) Name() string { return "Check_Runtime" }

func (s CheckRuntime) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	st, err := s.Provisioner.RuntimeOperationStatus(ctx, op.Data.Context.GlobalAccountID, op.Data.ProvisionerOperationID)
	if err != nil {
		op.LastError = fmt.Sprintf("reading the provisioner's operation: %v", err)
		return op, s.PollInterval, nil
	}
	done, err := client.Outcome(st)
	if err != nil {
		return op, 0, err
	}
	if !done {
		op.LastError = ""
		return op, s.PollInterval, nil
	}
	dashboard := fmt.Sprintf("%s/?kubeconfigID=%s", s.Defaults.DashboardURL, op.InstanceID)
	if _, err := storage.ModifyInstance(ctx, s.Instances, op.InstanceID, func(i *storage.Instance) { i.DashboardURL = dashboard }); err != nil {
		op.LastError = fmt.Sprintf("storing the dashboard URL: %v", err)
		return op, s.PollInterval, nil
	}
	return op, 0, nil
}
