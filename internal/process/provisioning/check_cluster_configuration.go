package provisioning

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/reconciler"
	"github.com/sirupsen/logrus"
)

// CheckClusterConfiguration waits until the reconciler has installed the cluster configuration.
type CheckClusterConfiguration struct{ Deps }

func (CheckClusterConfiguration) Name() string { return "Check_Cluster_Configuration" }

func (s CheckClusterConfiguration) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	st, err := s.Systems.Reconciler.GetStatus(ctx, op.Data.RuntimeID)
	if err != nil {
		wait, err := s.Systems.Retry(&op, "Reconciler", "reading the cluster's status", err, s.PollInterval)
		return op, wait, err
	}
	wait, err := ReconcileOutcome(st, op.Data.ReconcilerConfigurationVersion)
	if err != nil {
		return op, 0, fmt.Errorf("Reconciler: %w (step %s)", err, op.CurrentStep())
	}
	if wait {
		op.LastError = "Reconciler: cluster is " + st.Status
		return op, s.PollInterval, nil
	}
	op.LastError = ""
	return op, 0, nil
}

// ReconcileOutcome reads a cluster's status: wait while the reconciler works on it, an error when it
// failed, done when the applied configuration (or a later one) is ready.
func ReconcileOutcome(st *reconciler.State, applied int64) (wait bool, err error) {
	switch st.Status {
	case reconciler.StatusReady:
		if st.ConfigurationVersion < applied {
			return true, nil // the status is of an older configuration
		}
		return false, nil
	case reconciler.StatusReconcilePending, reconciler.StatusReconciling:
		return true, nil
	case reconciler.StatusError:
		return false, fmt.Errorf("installing Kyma failed (configuration version %d)", st.ConfigurationVersion)
	default:
		return false, fmt.Errorf("unexpected cluster status %q", st.Status)
	}
}
