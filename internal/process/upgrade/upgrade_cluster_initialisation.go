package upgrade

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
)

// ClusterInitialisation reads the runtime to upgrade from the instance.
type ClusterInitialisation struct{ Deps }

func (ClusterInitialisation) Name() string { return "Upgrade_Cluster_Initialisation" }

func (s ClusterInitialisation) Run(ctx context.Context, op ClusterOp, _ logrus.FieldLogger) (ClusterOp, time.Duration, error) {
	inst, err := s.Instances.GetInstance(ctx, op.InstanceID)
	if err != nil {
		op.LastError = fmt.Sprintf("reading the instance: %v", err)
		return op, s.PollInterval, nil
	}
	if inst.RuntimeID == "" {
		return op, 0, fmt.Errorf("instance %s has no runtime to upgrade", op.InstanceID)
	}
	op.Data.GlobalAccountID, op.Data.RuntimeID, op.LastError = inst.GlobalAccountID, inst.RuntimeID, ""
	op.Description = "upgrading the cluster"
	return op, 0, nil
}
