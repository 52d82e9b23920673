package acceptance

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
	ot "github.com/kyma-project/kyma-environment-broker/internal/orchestration/orchestrationtest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

// leading is the log line of a replica whose orchestration scheduler took the lock.
const leading = "scheduling orchestrations in this replica"

// Two replicas on PostgreSQL sharing one sandbox; the one whose orchestration scheduler holds the lock is stopped
// (SIGSTOP, its database connections left open). An orchestration created through the other
// replica runs there once the stopped holder's lock lease expires, and finishes while the
// holder is still stopped; resumed (SIGCONT), the old holder upgrades nothing again.
func TestTheSchedulerFailsOverFromAHungReplica(t *testing.T) {
	const n, lockLease = 6, 3 * time.Second
	// Replicas share one sandbox, served by the test so that it does not stop with the hung
	// replica: each embedding its own on the database would be two Directors (and a second
	// embedded sandbox does not start while the first serves).
	sb := sharedSandbox(t, 38)
	db := pgtest.NewDatabase(t)
	env := []string{"APP_SANDBOX_URL=" + sb.URL, "APP_DATABASE_LOCK_LEASE=" + lockLease.String(), "APP_ORCHESTRATION_POLL_INTERVAL=100ms",
		"APP_ORCHESTRATION_LOCK_RETRY_INTERVAL=200ms"}
	replicas := []*brokerProcess{onPostgres(t, db, env...), onPostgres(t, db, env...)}
	for _, r := range replicas {
		r.start()
	}
	ids, ops := provisionMany(t, replicas[0].client(), n, "lock")
	waitAll(t, replicas[0].client(), ids, ops, 3*time.Minute)

	leader := -1
	for deadline := time.Now().Add(time.Minute); leader < 0; time.Sleep(50 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "no replica's scheduler took the lock")
		for i, r := range replicas {
			raw, err := os.ReadFile(r.logs.Name())
			require.NoError(t, err)
			if strings.Contains(string(raw), leading) {
				leader = i
			}
		}
	}
	hung, other := replicas[leader], replicas[1-leader]
	require.NoError(t, hung.cmd.Process.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = hung.cmd.Process.Signal(syscall.SIGCONT) })
	stopped := time.Now()

	b := other.client()
	id := ot.UpgradeKyma(t, b, "2.21.0", 2, map[string]any{"target": "all"})
	first := ot.Wait(t, b, id, time.Minute, func(st dto.StatusResponse) bool {
		return st.OperationStats[dto.InProgress]+st.OperationStats[dto.Succeeded] > 0
	}, nil)
	t.Logf("the first upgrade started %s after the holder hung (lock lease %s): %v",
		time.Since(stopped).Round(100*time.Millisecond), lockLease, first.OperationStats)
	st := ot.Wait(t, b, id, 3*time.Minute, nil, nil)
	require.Equal(t, dto.Succeeded, st.State, st.Description)
	t.Logf("the orchestration finished %s after the holder hung, the holder still stopped", time.Since(stopped).Round(100*time.Millisecond))

	require.NoError(t, hung.cmd.Process.Signal(syscall.SIGCONT))
	// The resumed replica's scheduler finds its lock gone and the orchestration finished.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		raw, err := os.ReadFile(hung.logs.Name())
		require.NoError(t, err)
		if strings.Contains(string(raw), "lost the scheduler lock") {
			break
		}
		require.True(t, time.Now().Before(deadline), "the resumed replica did not notice that it lost the lock")
	}
	store := other.openStore()
	defer store.Close()
	for inst, count := range ot.UpgradesOf(t, store, ids) {
		assert.Equal(t, 1, count, "instance %s upgraded once", inst)
	}
}
