package operations

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
)

// CleanupCluster removes Kyma from the runtime before its cluster goes. It must not block the
// deprovisioning: after CleanupRetryTime it is recorded as executed but not completed.
type CleanupCluster struct {
	Deps
	RetryTime time.Duration
}

func (CleanupCluster) Name() string { return "Cleanup_Cluster" }

func (s CleanupCluster) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	rt, err := s.Runtimes.GetRuntime(ctx, op.Data.RuntimeID)
	if err != nil {
		return op.RetryOperationWithoutFail(fmt.Sprintf("reading runtime: %v", err), s.PollInterval, s.RetryTime)
	}
	if rt.Secrets[KubeconfigKey] == "" {
		return op, 0, nil // the cluster never got ready: nothing inside it to clean up
	}
	if len(rt.Allocation) > 0 {
		return op, 0, nil // a namespace of a shared host: Kyma was never installed; the backend removes the namespace
	}
	kc := rt.Secrets[KubeconfigKey]
	if b, err := s.backend(op); err == nil {
		// A renewal that fails leaves the stored one, which may still do.
		if fresh, _, err := FreshKubeconfig(ctx, b, s.Runtimes, RuntimeSpec(op.Data.RuntimeID, op.Data.Tenant, op.Data.Config), kc, op.Now()); err == nil {
			kc = fresh
		}
	}
	c, err := s.Clusters.ForKubeconfig(kc)
	if err == nil {
		err = c.DeleteKyma(ctx)
	}
	if err != nil {
		return op.RetryOperationWithoutFail(fmt.Sprintf("deleting Kyma from the runtime: %v", err), s.PollInterval, s.RetryTime)
	}
	return op, 0, nil
}
