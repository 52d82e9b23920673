package operations_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/operations"
)

// A backend that knows when the cluster will be ready (the simulated one) is asked again then,
// not every poll interval; one that does not, or soon, is polled.
func TestWaitForClusterCreationUntilDone(t *testing.T) {
	run := func(t *testing.T, doneAt time.Time) time.Duration {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, false)
		data.RequestedAt = map[string]time.Time{"create": t0}
		e.backend.set(func(b *fakeBackend) {
			b.status = infrastructure.Status{Phase: infrastructure.PhaseInProgress, DoneAt: doneAt}
		})
		op, wait, err := operations.WaitForClusterCreation{Deps: e.deps}.Run(e.ctx, stepOp("Wait_For_Cluster_Creation", t0, data), testLog())
		require.NoError(t, err)
		assert.Equal(t, "waiting for the cluster to be created", op.LastError)
		return wait
	}
	wait := run(t, t0.Add(30*time.Minute))
	assert.Greater(t, wait, 29*time.Minute)
	assert.LessOrEqual(t, wait, 30*time.Minute)
	assert.Equal(t, pollInterval, run(t, t0.Add(pollInterval/2)), "less than a poll interval to go")
	assert.Equal(t, pollInterval, run(t, time.Time{}), "no known time")
}
