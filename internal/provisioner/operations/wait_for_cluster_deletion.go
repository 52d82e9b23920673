package operations

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// WaitForClusterDeletion waits until the cluster is gone, unregisters the runtime from the
// Director and marks it deleted.
type WaitForClusterDeletion struct{ Deps }

func (WaitForClusterDeletion) Name() string { return "Wait_For_Cluster_Deletion" }

func (s WaitForClusterDeletion) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	b, err := s.backend(op)
	if err != nil {
		return op, 0, err
	}
	gone, err := b.Deleted(ctx, spec(&op, requestDelete))
	if err != nil {
		return s.waitFor(op, fmt.Sprintf("checking cluster deletion: %v", err))
	}
	if !gone {
		return s.waitFor(op, "waiting for the cluster to be deleted")
	}
	if op.Data.CompassRuntimeID != "" && !slices.Contains(op.Progress.ExecutedButNotCompleted, s.Name()) {
		if err := s.Director.UnregisterRuntime(ctx, op.Data.Tenant, op.Data.CompassRuntimeID); err != nil {
			// Deprovisioning never waits on the Director for long: after the cleanup window (at
			// once for an answer waiting will not change) the runtime is left registered, recorded
			// with the Director's answer, and the deletion goes on.
			msg := fmt.Sprintf("Director: unregistering the runtime: %v", err)
			if !clientkit.Retryable(err) {
				op.NotCompleted(msg)
			} else {
				window := s.DirectorCleanupTime
				if window <= 0 {
					window = defaultDirectorCleanupTime
				}
				out, wait, _ := op.RetryOperationWithoutFail(msg, s.PollInterval, window)
				if wait > 0 {
					return out, wait, nil
				}
				op = out
			}
		}
	}
	if err := s.updateRuntime(ctx, op.Data.RuntimeID, func(rt *storage.Runtime) error {
		rt.Deleted = true
		delete(rt.Secrets, KubeconfigKey)
		return nil
	}); err != nil {
		return s.waitFor(op, fmt.Sprintf("marking runtime deleted: %v", err))
	}
	return op, 0, nil
}
