// Package durability holds the engine's process-level tests: real worker processes on a real
// PostgreSQL server, killed with SIGKILL and run as several replicas.
package durability

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
	"github.com/lib/pq"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	if os.Getenv(envWorker) != "" {
		os.Exit(workerMain())
	}
	pgtest.Main(m)
}

type env struct {
	t     *testing.T
	url   string
	db    *sql.DB
	store storage.Store
	// addr is the fixed address of workers that share one owner across a restart.
	addr string
}

// freeAddr is a loopback address nothing listens on now, for a worker to bind.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func setup(t *testing.T, operations int) *env {
	t.Helper()
	url := pgtest.NewDatabase(t)
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	store, err := openStore(context.Background(), url, log)
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	db, err := sql.Open("postgres", url)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	_, err = db.Exec(`
		CREATE TABLE effects (operation_id TEXT NOT NULL, step TEXT NOT NULL, replica TEXT NOT NULL,
			PRIMARY KEY (operation_id, step));
		CREATE TABLE replays (operation_id TEXT NOT NULL, step TEXT NOT NULL, replica TEXT NOT NULL);
		CREATE TABLE runs (id BIGSERIAL PRIMARY KEY, operation_id TEXT NOT NULL, step TEXT NOT NULL,
			replica TEXT NOT NULL, started_at TIMESTAMPTZ NOT NULL, finished_at TIMESTAMPTZ NOT NULL);
		CREATE INDEX runs_op ON runs(operation_id);`)
	require.NoError(t, err)
	for i := 0; i < operations; i++ {
		op, err := engine.NewOperation(opType, fmt.Sprintf("instance-%d", i), payload{}, time.Hour, time.Now())
		require.NoError(t, err)
		_, err = store.Operations().InsertOperation(context.Background(), op)
		require.NoError(t, err)
	}
	return &env{t: t, url: url, db: db, store: store}
}

func (e *env) startWorker(name string, workers int, stepSleep, lease time.Duration, extraEnv ...string) *exec.Cmd {
	e.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		envWorker+"="+name, envDB+"="+e.url, envStepSleep+"="+stepSleep.String(),
		envWorkers+"="+fmt.Sprint(workers), envLease+"="+lease.String())
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(e.t, cmd.Start())
	e.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
		}
	})
	return cmd
}

func (e *env) count(query string, args ...any) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.db.QueryRow(query, args...).Scan(&n))
	return n
}

func (e *env) waitFor(what string, timeout time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// blockedStep is where the first worker of a kill test holds every operation that reaches it.
const blockedStep = "step_4"

// killWhenHeld kills w with SIGKILL once its workers all hang in blockedStep: work is in
// flight at the kill by construction, whatever the machine's speed.
func (e *env) killWhenHeld(w *exec.Cmd, workers int) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("%d operations held in %s", workers, blockedStep), 120*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM effects WHERE step = $1`, blockedStep) >= workers
	})
	require.NoError(e.t, w.Process.Signal(os.Kill))
	_, _ = w.Process.Wait()
}

// waitForProgress waits until cond reports done, failing only when its progress figure has
// not changed for stall.
func (e *env) waitForProgress(what string, stall time.Duration, cond func() (progress int, done bool)) {
	e.t.Helper()
	last, done := cond()
	moved := time.Now()
	for !done {
		if time.Since(moved) > stall {
			e.t.Fatalf("no progress for %s waiting for %s (at %d)", stall, what, last)
		}
		time.Sleep(50 * time.Millisecond)
		var p int
		if p, done = cond(); p != last {
			last, moved = p, time.Now()
		}
	}
}

func (e *env) operationsIn(state storage.OperationState) int {
	return e.count(`SELECT count(*) FROM operations WHERE state = $1`, string(state))
}

// TestKillNineMidRun: 200 operations of 5 steps; the worker is killed with SIGKILL while it
// runs them (its workers all held in step_4, so the kill lands on work in flight) and a new
// worker is started. Every operation succeeds, every side effect exists exactly
// once, and only operations that were in flight at the kill may see their interrupted step
// run again (idempotently).
func TestKillNineMidRun(t *testing.T) {
	const ops, workers = 200, 10
	e := setup(t, ops)
	// The second worker has another owner and takes over once the first one's leases expire:
	// short, but only the first worker's leases expire here (it is dead), and the second one's
	// are renewed every third of it even on a loaded machine; a lost one would show as a
	// replay outside the in-flight set.
	const lease = 3 * time.Second
	w := e.startWorker("first", workers, 10*time.Millisecond, lease, envBlock+"="+blockedStep)
	e.killWhenHeld(w, workers)

	atKill := e.count(`SELECT count(*) FROM effects`)
	inFlight := map[string]bool{}
	rows, err := e.db.Query(`SELECT id FROM operations WHERE lease_owner IS NOT NULL AND state IN ('pending','in progress')`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		inFlight[id] = true
	}
	require.NoError(t, rows.Close())
	t.Logf("killed with %d of %d effects recorded, %d operations in flight", atKill, ops*stepsPerOp, len(inFlight))
	require.Less(t, atKill, ops*stepsPerOp, "the kill must land mid-run")
	require.NotEmpty(t, inFlight)

	e.startWorker("second", workers, 10*time.Millisecond, lease)
	e.waitFor("all operations finished", 300*time.Second, func() bool {
		return e.operationsIn(storage.StateSucceeded)+e.operationsIn(storage.StateFailed) == ops
	})

	var failures []string
	rows, err = e.db.Query(`SELECT id, last_error FROM operations WHERE state <> 'succeeded'`)
	require.NoError(t, err)
	for rows.Next() {
		var id, msg string
		require.NoError(t, rows.Scan(&id, &msg))
		failures = append(failures, id+": "+msg)
	}
	require.NoError(t, rows.Close())
	require.Empty(t, failures)
	assert.Equal(t, ops*stepsPerOp, e.count(`SELECT count(*) FROM effects`))
	assert.Equal(t, ops, e.count(`SELECT count(*) FROM (SELECT operation_id FROM effects GROUP BY operation_id HAVING count(*) = $1) x`, stepsPerOp))

	replays := e.count(`SELECT count(*) FROM replays`)
	t.Logf("replayed steps after restart: %d", replays)
	assert.LessOrEqual(t, replays, len(inFlight), "at most the interrupted step of each in-flight operation runs again")
	rows, err = e.db.Query(`SELECT operation_id FROM replays`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		assert.True(t, inFlight[id], "operation %s was not in flight at the kill but replayed a step", id)
	}
	require.NoError(t, rows.Close())
	// Finished steps are never rerun: apart from replays and step_3's one wait, each step ran
	// once. A run interrupted by the kill before it wrote its record is not recorded (at most
	// one per in-flight operation), and a replay adds one.
	runs := e.count(`SELECT count(*) FROM runs`)
	assert.GreaterOrEqual(t, runs, ops*(stepsPerOp+1)-len(inFlight))
	assert.LessOrEqual(t, runs, ops*(stepsPerOp+1)+replays)
}

// TestKillNineRestartMovesAtOnce: a worker listening on a fixed address (its engine's owner is
// derived from it, as the broker's is) is killed with SIGKILL while it holds operations in a
// step and started again at once with the default 30s lease: the operations it held move again
// before their leases expire (it reclaims them), and all succeed.
func TestKillNineRestartMovesAtOnce(t *testing.T) {
	const ops, workers = 200, 10
	e := setup(t, ops)
	const lease = 30 * time.Second
	addr := freeAddr(t)
	w := e.startWorker("first", workers, 10*time.Millisecond, lease, envAddr+"="+addr, envBlock+"="+blockedStep)
	e.killWhenHeld(w, workers)
	var held []string
	var expires time.Time
	rows, err := e.db.Query(`SELECT id, lease_expires_at FROM operations WHERE lease_owner IS NOT NULL AND state IN ('pending','in progress')`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		var until time.Time
		require.NoError(t, rows.Scan(&id, &until))
		held = append(held, id)
		if expires.IsZero() || until.Before(expires) {
			expires = until
		}
	}
	require.NoError(t, rows.Close())
	require.NotEmpty(t, held, "the kill must land while operations are held")

	var restarted time.Time
	require.NoError(t, e.db.QueryRow(`SELECT clock_timestamp()`).Scan(&restarted))
	e.startWorker("second", 10, 10*time.Millisecond, lease, envAddr+"="+addr)
	e.waitFor("all operations finished", 120*time.Second, func() bool {
		return e.operationsIn(storage.StateSucceeded)+e.operationsIn(storage.StateFailed) == ops
	})
	assert.Equal(t, ops, e.operationsIn(storage.StateSucceeded))
	assert.Equal(t, ops*stepsPerOp, e.count(`SELECT count(*) FROM effects`))

	// When each operation that was held at the kill ran a step again in the new process.
	var first, last float64
	require.NoError(t, e.db.QueryRow(`SELECT EXTRACT(EPOCH FROM min(moved) - $1), EXTRACT(EPOCH FROM max(moved) - $1)
		FROM (SELECT min(started_at) AS moved FROM runs WHERE replica = 'second' AND started_at >= $1 AND operation_id = ANY($2)
			GROUP BY operation_id) x`,
		restarted, pq.Array(held)).Scan(&first, &last))
	t.Logf("%d operations held at the kill; restart to the first of them moving: %.2fs, to the last: %.2fs", len(held), first, last)
	// The invariant is that the restarted owner reclaims its leases instead of waiting them
	// out: every held operation moves before the earliest of their leases would have expired.
	// How many seconds that takes depends on the machine's load and is only logged.
	var beforeExpiry float64
	require.NoError(t, e.db.QueryRow(`SELECT EXTRACT(EPOCH FROM $1::timestamptz - $2::timestamptz)`, expires, restarted).Scan(&beforeExpiry))
	assert.Less(t, last, beforeExpiry, "every held operation moves again before its %s lease expires (%.2fs after the restart)", lease, beforeExpiry)
}

// TestThreeReplicasShareWork: 3 engine processes on one database run 1,000 operations; no two
// runs of one operation's steps ever overlap in time, every replica takes part, all succeed.
func TestThreeReplicasShareWork(t *testing.T) {
	const ops = 1000
	e := setup(t, ops)
	var wg sync.WaitGroup
	for _, name := range []string{"replica-a", "replica-b", "replica-c"} {
		wg.Add(1)
		// The default lease: this test asserts no replays, which a lease lost to a stall of a
		// loaded machine (not a crash) would cause.
		go func(name string) { defer wg.Done(); e.startWorker(name, 8, time.Millisecond, 30*time.Second) }(name)
	}
	wg.Wait()
	// How long 1,000 operations take depends on the machine's load: fail only when they stop
	// moving, not after a fixed time.
	e.waitForProgress("all operations finished", 120*time.Second, func() (int, bool) {
		done := e.operationsIn(storage.StateSucceeded) + e.operationsIn(storage.StateFailed)
		return e.count(`SELECT count(*) FROM runs`), done == ops
	})
	assert.Equal(t, ops, e.operationsIn(storage.StateSucceeded))
	assert.Equal(t, ops*stepsPerOp, e.count(`SELECT count(*) FROM effects`))
	assert.Equal(t, 0, e.count(`SELECT count(*) FROM replays`))

	overlaps := e.count(`SELECT count(*) FROM runs a JOIN runs b
		ON a.operation_id = b.operation_id AND a.id < b.id
		AND a.started_at < b.finished_at AND b.started_at < a.finished_at`)
	assert.Equal(t, 0, overlaps, "runs of one operation overlapped in time")

	rows, err := e.db.Query(`SELECT replica, count(*) FROM runs GROUP BY replica ORDER BY replica`)
	require.NoError(t, err)
	var share []string
	for rows.Next() {
		var r string
		var n int
		require.NoError(t, rows.Scan(&r, &n))
		share = append(share, fmt.Sprintf("%s=%d", r, n))
	}
	require.NoError(t, rows.Close())
	t.Logf("step runs per replica: %s", strings.Join(share, " "))
	assert.Len(t, share, 3, "every replica ran steps")
	// How many operations moved between replicas (claimed again after a wait or a release).
	t.Logf("operations run by more than one replica: %d",
		e.count(`SELECT count(*) FROM (SELECT operation_id FROM runs GROUP BY operation_id HAVING count(DISTINCT replica) > 1) x`))
}
