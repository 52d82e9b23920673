package deprovisioning

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/reconciler"
	"github.com/sirupsen/logrus"
)

// DeregisterCluster removes the cluster from the reconciler and waits until the reconciler has
// removed Kyma from it.
type DeregisterCluster struct{ Deps }

func (DeregisterCluster) Name() string { return "Deregister_Cluster" }

func (s DeregisterCluster) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	res := &op.Data.Resources
	if res.ReconcilerClusterID == "" {
		return op, 0, nil
	}
	r := s.Systems.Reconciler
	st, err := r.GetStatus(ctx, res.ReconcilerClusterID)
	switch {
	case reconciler.IsNotFound(err):
		res.ReconcilerClusterID, op.LastError = "", ""
		return op, 0, nil
	case err != nil:
		return op, s.Systems.Cleanup(&op, "Reconciler", "reading the cluster's status", err, s.PollInterval), nil
	}
	switch st.Status {
	case reconciler.StatusDeleted:
		res.ReconcilerClusterID, op.LastError = "", ""
		return op, 0, nil
	case reconciler.StatusDeletePending, reconciler.StatusDeleting:
		return op, s.Systems.Cleanup(&op, "Reconciler", "deleting the cluster", errStillThere, s.PollInterval), nil
	case reconciler.StatusDeleteErrorRetryable:
		// The reconciler retries the deletion itself: wait and recheck, without asking again.
		return op, s.Systems.Cleanup(&op, "Reconciler", "deleting the cluster", fmt.Errorf("status %s, the reconciler retries", st.Status), s.PollInterval), nil
	case reconciler.StatusDeleteError:
		return op, s.Systems.Cleanup(&op, "Reconciler", "deleting the cluster", fmt.Errorf("status %s", st.Status), s.PollInterval), nil
	}
	if err := r.DeleteCluster(ctx, res.ReconcilerClusterID); err != nil {
		return op, s.Systems.Cleanup(&op, "Reconciler", "deleting the cluster", err, s.PollInterval), nil
	}
	return op, s.PollInterval, nil
}
