package operations

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/compass"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/sirupsen/logrus"
)

// WaitForClusterDomain waits until the cluster has a DNS domain and labels the runtime in
// the Director with the cluster's name and domain and the console URL (the broker shows it as
// the instance's dashboard URL).
type WaitForClusterDomain struct{ Deps }

func (WaitForClusterDomain) Name() string { return "Wait_For_Cluster_Domain" }

func (s WaitForClusterDomain) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	if op.Data.ClusterDomain == "" {
		b, err := s.backend(op)
		if err != nil {
			return op, 0, err
		}
		st, err := b.Status(ctx, spec(&op, requestCreate))
		if err != nil {
			return s.waitFor(op, fmt.Sprintf("reading cluster status: %v", err))
		}
		if st.Phase == infrastructure.PhaseFailed {
			return op, 0, fmt.Errorf("cluster creation failed: %s", st.Reason)
		}
		if st.Domain == "" {
			return s.waitFor(op, "waiting for the cluster's domain")
		}
		op.Data.ClusterDomain = st.Domain
	}
	labels := map[string]string{
		"gardenerClusterName":   op.Data.Config.Cluster.Name,
		"gardenerClusterDomain": op.Data.ClusterDomain,
		compass.ConsoleURLLabel: "https://console." + op.Data.ClusterDomain,
	}
	if err := s.Director.UpdateRuntimeLabels(ctx, op.Data.Tenant, op.Data.CompassRuntimeID, labels); err != nil {
		return s.directorFailed(op, "labelling the runtime", err)
	}
	return op, 0, nil
}
