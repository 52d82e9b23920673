package upgrade

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/sirupsen/logrus"
)

// UpgradeCluster has the provisioner upgrade the cluster (Kubernetes and machine image versions)
// and waits for it.
type UpgradeCluster struct{ Deps }

func (UpgradeCluster) Name() string { return "Upgrade_Cluster" }

func (s UpgradeCluster) Run(ctx context.Context, op ClusterOp, log logrus.FieldLogger) (ClusterOp, time.Duration, error) {
	d := op.Data
	if d.ProvisionerOperationID == "" {
		in := gqlschema.GardenerUpgradeInput{}
		if d.KubernetesVersion != "" {
			in.KubernetesVersion = &d.KubernetesVersion
		}
		if d.MachineImageVersion != "" {
			in.MachineImageVersion = &d.MachineImageVersion
		}
		st, err := s.Provisioner.UpgradeShoot(ctx, d.GlobalAccountID, d.RuntimeID, gqlschema.UpgradeShootInput{GardenerConfig: &in})
		switch {
		case apperr.CodeOf(err) == apperr.CodeBadRequest || apperr.CodeOf(err) == apperr.CodeNotFound:
			return op, 0, fmt.Errorf("the provisioner rejected the cluster upgrade: %w", err)
		case err != nil:
			return op.RetryOperation(fmt.Sprintf("calling the provisioner: %v", err), s.PollInterval, s.Systems.RetryTime)
		}
		op.Data.ProvisionerOperationID = *st.ID
		log.WithField("provisioner_operation_id", *st.ID).Info("cluster upgrade requested")
		return op, time.Millisecond, nil
	}
	wait, err := systems.AwaitProvisioner(ctx, s.Provisioner, &op, d.GlobalAccountID, d.ProvisionerOperationID, s.PollInterval)
	return op, wait, err
}
