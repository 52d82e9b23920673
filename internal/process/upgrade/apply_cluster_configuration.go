package upgrade

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/reconciler"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/sirupsen/logrus"
)

// ApplyClusterConfiguration hands the new Kyma version with the overrides to the reconciler and
// waits until it is installed (Kyma 2.x only).
type ApplyClusterConfiguration struct{ Deps }

func (ApplyClusterConfiguration) Name() string { return "Apply_Cluster_Configuration" }

func (s ApplyClusterConfiguration) Run(ctx context.Context, op KymaOp, log logrus.FieldLogger) (KymaOp, time.Duration, error) {
	d := op.Data
	if d.ReconcilerConfigurationVersion == 0 {
		resolved, err := d.Overrides.Resolve(op.Secrets)
		if err != nil {
			return op, 0, err
		}
		st, err := s.Systems.Reconciler.ApplyClusterConfig(ctx, reconciler.Cluster{
			RuntimeID:    d.RuntimeID,
			RuntimeInput: reconciler.RuntimeInput{Name: d.Name, Description: fmt.Sprintf("Kyma runtime of instance %s", op.InstanceID)},
			KymaConfig:   provisioning.ReconcilerKymaConfig(d.KymaVersion, d.PlanName, s.Defaults.Components, resolved, d.Administrators),
			Metadata: reconciler.Metadata{
				GlobalAccountID: d.GlobalAccountID, SubAccountID: d.SubAccountID, ServiceID: d.ServiceID, ServicePlanID: d.PlanID,
				ServicePlanName: d.PlanName, ShootName: d.ShootName, InstanceID: op.InstanceID, Region: d.Region,
			},
			Kubeconfig: op.Secrets[provisioning.KubeconfigSecret],
		})
		if err != nil {
			wait, err := s.Systems.Retry(&op, "Reconciler", "applying the cluster configuration", err, s.PollInterval)
			return op, wait, err
		}
		op.Data.ReconcilerConfigurationVersion, op.Data.Resources.ReconcilerClusterID = st.ConfigurationVersion, d.RuntimeID
		log.WithField("configuration_version", st.ConfigurationVersion).Info("cluster configuration applied")
		return op, time.Millisecond, nil
	}
	wait, err := s.Systems.AwaitReconciler(ctx, &op, d.RuntimeID, d.ReconcilerConfigurationVersion, s.PollInterval)
	return op, wait, err
}
