package durability

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The mixed process: a step that calls out, two local steps, another that calls out, a
// read-only step and a last step that calls out. KEB_DURABILITY_BLOCK names a step that, in
// that worker, records its run and then hangs until the worker is killed: the kill lands
// exactly there.
const (
	envProcess = "KEB_DURABILITY_PROCESS"
	envBlock   = "KEB_DURABILITY_BLOCK"
)

var mixedSteps = []struct {
	name                        string
	local, readOnly, idempotent bool
}{{"ext_1", false, false, false}, {"local_2", true, false, false}, {"local_3", true, false, false}, {"ext_4", false, false, false},
	{"read_5", false, true, false}, {"ext_6", false, false, false}, {"idem_7", false, false, true}, {"ext_8", false, false, false}}

// localStep only computes from the operation (it records its run for the test to count); it
// stands for a read-only step too, whose reads change nothing.
type localStep struct {
	name, replica string
	db            *sql.DB
	block         bool
}

func (s localStep) Name() string { return s.name }

func (s localStep) Run(ctx context.Context, op engine.Operation[payload], _ logrus.FieldLogger) (engine.Operation[payload], time.Duration, error) {
	if _, err := s.db.ExecContext(ctx, `INSERT INTO runs(operation_id, step, replica, started_at, finished_at) VALUES ($1,$2,$3,clock_timestamp(),clock_timestamp())`,
		op.ID, s.name, s.replica); err != nil {
		return op, 0, fmt.Errorf("recording run: %w", err)
	}
	if s.block {
		<-ctx.Done()
		return op, 0, ctx.Err()
	}
	op.Data.Steps = append(op.Data.Steps, s.name)
	return op, 0, nil
}

// blockingStep is an effectStep that hangs after its side effect (before the engine hears of it).
type blockingStep struct{ effectStep }

func (s blockingStep) Run(ctx context.Context, op engine.Operation[payload], log logrus.FieldLogger) (engine.Operation[payload], time.Duration, error) {
	if _, _, err := s.effectStep.Run(ctx, op, log); err != nil {
		return op, 0, err
	}
	<-ctx.Done()
	return op, 0, ctx.Err()
}

func mixedDefinition(db *sql.DB, replica string) (*engine.Process[payload], error) {
	block := os.Getenv(envBlock)
	var defs []engine.StepDef[payload]
	for _, st := range mixedSteps {
		var s engine.Step[payload] = effectStep{name: st.name, replica: replica, db: db}
		switch {
		case st.local || st.readOnly:
			s = localStep{name: st.name, replica: replica, db: db, block: block == st.name}
		case block == st.name:
			s = blockingStep{effectStep{name: st.name, replica: replica, db: db}}
		}
		defs = append(defs, engine.StepDef[payload]{Step: s, Local: st.local, ReadOnly: st.readOnly, Idempotent: st.idempotent, RunTimeout: time.Minute})
	}
	return engine.Staged(opType, time.Hour, engine.Stage[payload]{Name: "mixed", Steps: defs})
}

func mixedEnv(block, addr string) []string {
	return []string{envProcess + "=mixed", envBlock + "=" + block, envAddr + "=" + addr}
}

// killAt runs ops operations of the mixed process in a worker whose step block hangs, kills
// the worker with SIGKILL once every operation is in it, and finishes them in a new worker.
func killAt(t *testing.T, block string, ops int) *env {
	e := setup(t, ops)
	// Both workers listen on one fixed address and so share an owner: the new worker reclaims
	// the killed one's leases on start instead of waiting for them to expire. The lease is the
	// default 30s, far longer than any stall of a loaded machine: these tests are about what a
	// crash re-runs, and a lease lost under load would re-run steps without a crash.
	e.addr = freeAddr(t)
	w := e.startWorker("first", ops, 0, killTestLease, mixedEnv(block, e.addr)...)
	e.waitFor("every operation in "+block, 120*time.Second, func() bool {
		return e.count(`SELECT count(DISTINCT operation_id) FROM runs WHERE step = $1`, block) == ops
	})
	require.NoError(t, w.Process.Signal(os.Kill))
	_, _ = w.Process.Wait()
	return e
}

const killTestLease = 30 * time.Second

func (e *env) finish(ops int) {
	e.startWorker("second", ops, 0, killTestLease, mixedEnv("", e.addr)...)
	e.waitFor("all operations finished", 120*time.Second, func() bool {
		return e.operationsIn(storage.StateSucceeded)+e.operationsIn(storage.StateFailed) == ops
	})
	require.Equal(e.t, ops, e.operationsIn(storage.StateSucceeded))
	// The exact re-run counts below hold when neither worker lost a lease; a worker logs each
	// loss, and with killTestLease none is expected.
}

func (e *env) operationIDs() []string {
	rows, err := e.db.Query(`SELECT id FROM operations`)
	require.NoError(e.t, err)
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		require.NoError(e.t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(e.t, rows.Err())
	return ids
}

// operations reads every operation of the run.
func (e *env) operations() []storage.Operation {
	var out []storage.Operation
	for _, id := range e.operationIDs() {
		op, err := e.store.Operations().GetOperation(context.Background(), id)
		require.NoError(e.t, err)
		out = append(out, op)
	}
	return out
}

func (e *env) runsOf(step, replica string) int {
	return e.count(`SELECT count(*) FROM runs WHERE step = $1 AND replica = $2`, step, replica)
}

// TestKillAfterNonLocalStep: killed in the local step right after a step that called out, the
// row already holds that step's outcome: it is never run again, its effect exists once, and
// only the local step runs again.
func TestKillAfterNonLocalStep(t *testing.T) {
	const ops = 20
	e := killAt(t, "local_2", ops)
	require.Len(t, e.operationIDs(), ops)
	for _, op := range e.operations() {
		assert.True(t, op.Progress.Steps["ext_1"].Done, "ext_1's outcome is durable before local_2 runs")
		assert.Contains(t, string(op.Data), "ext_1", "and so is what it returned")
		assert.False(t, op.Progress.Steps["local_2"].Done)
	}

	e.finish(ops)
	assert.Equal(t, 0, e.runsOf("ext_1", "second"), "a step that called out and finished is never run again")
	assert.Equal(t, ops, e.count(`SELECT count(*) FROM effects WHERE step = 'ext_1'`))
	assert.Equal(t, 0, e.count(`SELECT count(*) FROM replays`))
	assert.Equal(t, ops, e.runsOf("local_2", "second"), "the local step that was running runs again")
	assert.Equal(t, ops, e.count(`SELECT count(*) FROM effects WHERE step = 'ext_4'`))
	for _, op := range e.operations() {
		assert.Equal(t, `{"steps":["ext_1","local_2","local_3","ext_4","read_5","ext_6","idem_7","ext_8"]}`, strings.TrimSpace(string(op.Data)))
	}
}

// TestKillReRunsLocalSteps: killed in the step that calls out after two local steps, the local
// steps' outcomes had not been written (they ride on the next write): both run again after the
// restart, the step that calls out runs again idempotently (its effect is found, not repeated),
// and the step before them is not run again.
func TestKillReRunsLocalSteps(t *testing.T) {
	const ops = 20
	e := killAt(t, "ext_4", ops)
	assert.Equal(t, ops, e.runsOf("local_2", "first"))
	assert.Equal(t, ops, e.runsOf("local_3", "first"))

	e.finish(ops)
	assert.Equal(t, 0, e.runsOf("ext_1", "second"))
	assert.Equal(t, ops, e.runsOf("local_2", "second"), "local steps re-run after a crash")
	assert.Equal(t, ops, e.runsOf("local_3", "second"), "local steps re-run after a crash")
	assert.Equal(t, ops, e.count(`SELECT count(*) FROM effects WHERE step = 'ext_4'`), "the effect exists once")
	assert.Equal(t, ops, e.count(`SELECT count(*) FROM replays WHERE step = 'ext_4'`), "found by its idempotency key")
}

// TestKillReRunsReadOnlySteps: killed in the step that calls out after a read-only step, the
// read's success had not been written (it rides on the next write, like a local step's): the
// read runs again, the step that calls out runs again idempotently, and the step that called
// out before the read (written before the read ran) is not run again.
func TestKillReRunsReadOnlySteps(t *testing.T) {
	const ops = 20
	e := killAfterARider(t, ops, "ext_4", "read_5", "ext_6")
	assert.Equal(t, ops, e.count(`SELECT count(*) FROM replays WHERE step = 'ext_6'`), "found by its idempotency key")
}

// TestKillReRunsIdempotentSteps: killed in the step that calls out after an idempotent step (an
// effect under a key of its own, found again on a rerun), the idempotent step's success had no
// write of its own: it runs again after the crash and finds its effect, which exists once; the
// step written before it does not run again.
func TestKillReRunsIdempotentSteps(t *testing.T) {
	const ops = 20
	e := killAfterARider(t, ops, "ext_6", "idem_7", "ext_8")
	assert.Equal(t, ops, e.count(`SELECT count(*) FROM effects WHERE step = 'idem_7'`), "its effect exists once")
	assert.Equal(t, ops, e.count(`SELECT count(*) FROM replays WHERE step = 'idem_7'`), "found again by its key")
}

// killAfterARider kills the workers of ops operations in killed, the step that calls out after
// rider (a step whose success rides on the next write), which follows written; then finishes
// them and checks what both kill tests share: written's outcome was durable and it does not run
// again, rider's was not and it runs again, and killed's effect exists once.
func killAfterARider(t *testing.T, ops int, written, rider, killed string) *env {
	t.Helper()
	e := killAt(t, killed, ops)
	for _, op := range e.operations() {
		assert.True(t, op.Progress.Steps[written].Done, "%s's outcome is durable before %s runs", written, rider)
		assert.False(t, op.Progress.Steps[rider].Done, "%s has no write of its own", rider)
	}
	e.finish(ops)
	assert.Equal(t, 0, e.runsOf(written, "second"))
	assert.Equal(t, ops, e.runsOf(rider, "second"), "%s runs again after a crash", rider)
	assert.Equal(t, ops, e.count(`SELECT count(*) FROM effects WHERE step = '`+killed+`'`), "the effect exists once")
	return e
}
