package acceptance

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
	"github.com/stretchr/testify/require"
)

// Two replicas on PostgreSQL share one sandbox served by the test (it does not stop with
// either). Replica A is stopped (SIGSTOP) while it holds operations in the middle of IAS
// registration (its IAS calls slowed, so they really are under way); replica B takes them over
// once their leases expire; A is resumed (SIGCONT). A's runs are over by then (their leases'
// time ran out on its monotonic clock): it sends nothing more for them, B's and A's creations
// settle on one service provider, and every stand-in holds exactly one object and one
// credential per runtime, each created once.
func TestAPausedReplicaIsFenced(t *testing.T) {
	const n, lease = 12, 4 * time.Second
	sb := sharedSandbox(t, 40)
	db := pgtest.NewDatabase(t)
	common := []string{"APP_SANDBOX_URL=" + sb.URL, "APP_ENGINE_LEASE_DURATION=" + lease.String()}
	a := onPostgres(t, db, append(common, "APP_ENGINE_OWNER=replica-a")...)
	b := onPostgres(t, db, append(common, "APP_ENGINE_OWNER=replica-b")...)
	a.start()
	b.start()
	t.Cleanup(func() { _ = a.cmd.Process.Signal(syscall.SIGCONT) }) // so that kill ends it
	store := a.openStore()
	defer store.Close()

	// Every IAS call takes a second: operations stay in IAS registration for seconds.
	require.NoError(t, sb.Sandbox.SetFaults("ias", sandbox.Faults{Latency: time.Second}))
	ids, ops := provisionMany(t, a.client(), n, "fence")
	inIAS := func(op storage.Operation) bool {
		sp := op.Progress.Steps[provisioning.IASRegistration{}.Name()]
		return op.LeaseOwner == "replica-a" && sp.Attempts > 0 && !sp.Done
	}
	var held []string
	for deadline := time.Now().Add(2 * time.Minute); len(held) == 0; time.Sleep(20 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "replica A never held an operation in IAS registration")
		for _, op := range unfinished(t, store, ops) {
			if inIAS(op) {
				held = append(held, op.ID)
			}
		}
	}
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := time.Now()
	t.Logf("stopped replica A holding %d operations in IAS registration", len(held))

	// B takes every one of them over (or finishes it) after the lease.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		left := 0
		for _, id := range held {
			op, err := store.Operations().GetOperation(context.Background(), id)
			require.NoError(t, err)
			if op.LeaseOwner == "replica-a" {
				left++
			}
		}
		if left == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "%d operations still leased by the stopped replica", left)
	}
	t.Logf("replica B took over after %s; resuming replica A", time.Since(stopped).Round(100*time.Millisecond))
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGCONT))

	waitAll(t, b.client(), ids, ops, 3*time.Minute)
	inv := readInventory(t, sb.URL)
	assertOnePerRuntime(t, inv, n)
	raw, err := os.ReadFile(a.logs.Name())
	require.NoError(t, err)
	t.Logf("replica A, resumed: %d calls refused by the fence", strings.Count(string(raw), "lease may have expired"))
}

// unfinished reads the operations among ids that have not ended.
func unfinished(t *testing.T, store storage.Store, ids []string) []storage.Operation {
	t.Helper()
	var out []storage.Operation
	for _, id := range ids {
		op, err := store.Operations().GetOperation(context.Background(), id)
		require.NoError(t, err)
		if op.State == storage.StatePending || op.State == storage.StateInProgress {
			out = append(out, op)
		}
	}
	return out
}
