package provisioning

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
)

// CheckClusterConfiguration waits until the reconciler has installed the cluster configuration.
type CheckClusterConfiguration struct{ Deps }

func (CheckClusterConfiguration) Name() string { return "Check_Cluster_Configuration" }

func (s CheckClusterConfiguration) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	wait, err := s.Systems.AwaitReconciler(ctx, &op, op.Data.RuntimeID, op.Data.ReconcilerConfigurationVersion, s.PollInterval)
	return op, wait, err
}
