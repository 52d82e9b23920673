package operations

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
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
	ns := allocationNamespace(rt)
	if len(rt.Allocation) > 0 && (ns == "" || !runtimeclient.InstallsModulesInNamespaces(s.Clusters)) {
		return op, 0, nil // a namespace of a shared host: Kyma was never installed; the backend removes the namespace
	}
	// A runtime in a namespace of its own with modules: the module manager's finalizer holds its
	// Kyma resource (and so the namespace) until the modules are removed.
	kc := rt.Secrets[KubeconfigKey]
	if b, err := s.backend(op); err == nil {
		// A renewal that fails leaves the stored one, which may still do.
		if fresh, _, err := FreshKubeconfig(ctx, b, s.Runtimes, RuntimeSpec(op.Data.RuntimeID, op.Data.Tenant, op.Data.Config), kc, op.Now()); err == nil {
			kc = fresh
		}
	}
	c, err := s.open(kc, ns)
	if err == nil {
		err = c.DeleteKyma(ctx)
	}
	if err != nil {
		return op.RetryOperationWithoutFail(fmt.Sprintf("deleting Kyma from the runtime: %v", err), s.PollInterval, s.RetryTime)
	}
	return op, 0, nil
}
