package provisioning

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/reconciler"
	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/sirupsen/logrus"
)

// CreateClusterConfiguration hands the runtime's Kyma configuration (components with their
// overrides, secrets marked) and kubeconfig to the reconciler, which installs Kyma 2.x.
type CreateClusterConfiguration struct{ Deps }

func (CreateClusterConfiguration) Name() string { return "Create_Cluster_Configuration" }

func (s CreateClusterConfiguration) Run(ctx context.Context, op Op, log logrus.FieldLogger) (Op, time.Duration, error) {
	if op.Data.ReconcilerConfigurationVersion != 0 {
		return op, 0, nil
	}
	resolved, err := op.Data.Overrides.Resolve(op.Secrets)
	if err != nil {
		return op, 0, err
	}
	d := op.Data
	admins := d.Parameters.Administrators
	if len(admins) == 0 && d.Context.UserID != "" {
		admins = []string{d.Context.UserID}
	}
	st, err := s.Systems.Reconciler.ApplyClusterConfig(ctx, reconciler.Cluster{
		RuntimeID:    d.RuntimeID,
		RuntimeInput: reconciler.RuntimeInput{Name: d.Parameters.Name, Description: fmt.Sprintf("Kyma runtime of instance %s", op.InstanceID)},
		KymaConfig:   ReconcilerKymaConfig(d.KymaVersion, d.PlanName, s.Defaults.Components, resolved, admins),
		Metadata: reconciler.Metadata{
			GlobalAccountID: d.Context.GlobalAccountID, SubAccountID: d.Context.SubAccountID, ServiceID: d.ServiceID,
			ServicePlanID: d.PlanID, ServicePlanName: d.PlanName, ShootName: d.ShootName, InstanceID: op.InstanceID, Region: d.Parameters.Region,
		},
		Kubeconfig: op.Secrets[KubeconfigSecret],
	})
	if err != nil {
		wait, err := s.Systems.Retry(&op, "Reconciler", "applying the cluster configuration", err, s.PollInterval)
		return op, wait, err
	}
	op.Data.ReconcilerConfigurationVersion, op.Data.Resources.ReconcilerClusterID, op.LastError = st.ConfigurationVersion, d.RuntimeID, ""
	log.WithFields(logrus.Fields{"cluster": st.Cluster, "configuration_version": st.ConfigurationVersion}).Info("cluster configuration applied")
	return op, 0, nil
}

// ReconcilerKymaConfig is the reconciler's Kyma configuration: every component with its own
// overrides and the global ones (the reconciler has no global configuration). Trial runtimes get
// the evaluation profile. Every component comes from the Kyma release of the version (no URL of its
// own) at that version: the API requires both fields.
func ReconcilerKymaConfig(version, plan string, components []string, o overrides.Overrides, admins []string) reconciler.KymaConfig {
	profile := "production"
	if plan == "trial" {
		profile = "evaluation"
	}
	k := reconciler.KymaConfig{Version: version, Profile: profile, Administrators: admins}
	for _, c := range o.Install(components) {
		comp := reconciler.Component{Component: c, Namespace: "kyma-system", Version: version, URL: "", Configuration: []reconciler.Configuration{}}
		for _, e := range append(append([]overrides.Entry(nil), o[overrides.Global]...), o[c]...) {
			comp.Configuration = append(comp.Configuration, reconciler.Configuration{Key: e.Key, Value: e.Value, Secret: e.Secret})
		}
		k.Components = append(k.Components, comp)
	}
	return k
}
