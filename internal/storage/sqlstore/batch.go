package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Concurrent SaveProgress calls on PostgreSQL are written in batches (group commit): an executor
// goroutine takes all calls that are waiting and writes them with one statement (one round trip
// and one commit for all). A call that finds the executor idle is written alone at once, so
// batching adds no latency; under load it saves a commit (an fsync) and a round trip per call.
// Each call keeps its own conditions (version, lease owner): a conflicting call in a batch simply
// matches no row and writes no events, without affecting the others. If a batch statement fails
// (e.g. a connection error), it was rolled back as a whole and each call is retried alone. Row
// locks are taken in ID order, like every other multi-row writer of operations, so a batch never
// deadlocks with lease extension, release or the sweeper.
//
// Two executors: while one batch executes in PostgreSQL, the next is encoded and sent, and
// PostgreSQL works on two batches at once (one executor kept one backend, one core, busy while
// the engine bench's workers queued). Batches hold disjoint operations (a worker waits for its save), and
// waits on row locks are short because every other writer of operations is a single short
// statement or transaction.
// A batch takes up to 256 calls: with more workers than that cap (APP_ENGINE_WORKERS) the
// executor would write full batches back to back while calls queue; bigger batches spread the
// statement's and the commit's fixed cost.
// The second executor takes only a batch of at least secondSaveBatch calls (startBulkCoalescer):
// it is there for a deep queue; fewer calls that arrive while the first is busy wait for it and
// go out together, so the end-to-end path writes fewer statements while a deep queue (the engine
// bench) still gets two executors. The measurements behind both constants are in
// docs/contributor/performance.md.
const (
	saveExecutors   = 2
	secondSaveBatch = 32
	maxSaveBatch    = 256
	// maxTxSaveBatch bounds SQLite's batch: the transaction holds the one writer connection
	// while it runs, and every other write (claims, instances) waits behind it.
	maxTxSaveBatch = 16
	// saveTimeout bounds one batch write; the callers' contexts are checked before it starts.
	saveTimeout = time.Minute
)

// saveCall is one SaveProgress call waiting to be written.
type saveCall struct {
	op     saveOp
	w      opWrite
	events []storage.Event
}

// A call's answer is a pointer: each call's done channel buffers one answer, and an Operation
// by value made that buffer ~0.5 KB per save.
type saveBatch = []*pending[saveCall, *storage.Operation]

// saveProgressBatchSQL writes many operations and their events in one statement (PostgreSQL).
// x holds one row per call (req = its index in the batch); the events carry the req of their
// call and are inserted only for calls whose update matched.
var saveProgressBatchSQL = `WITH x AS (
	SELECT * FROM unnest(?::int[], ?::text[], ?::bigint[], ?::text[], ?::text[], ?::text[], ?::timestamptz[],
		?::timestamptz[], ?::timestamptz[], ?::text[], ?::text[], ?::text[], ?::text[], ?::bytea[], ?::int[])
	AS x(req, id, version, owner, state, description, due_at, lease_expires_at, deadline, stage, progress, last_error, data, secrets, kept)
), l AS MATERIALIZED (
	-- Row locks in ID order, as every other multi-row writer takes them (see lockedInIDOrder):
	-- the update below would otherwise lock in the batch's order and deadlock with them. The
	-- update reads the batch from here, so it runs on the locked rows (a semi join on
	-- "id IN (SELECT id FROM l)" compared every pair: the planner takes unnest for 10 rows).
	SELECT x.* FROM x JOIN operations ON operations.id = x.id ORDER BY x.id FOR UPDATE OF operations
), u AS (
	UPDATE operations o SET state = x.state, description = x.description, updated_at = ?, version = o.version + 1,
		due_at = x.due_at, lease_owner = NULLIF(x.owner, ''),
		lease_expires_at = CASE WHEN x.owner = '' THEN NULL WHEN x.lease_expires_at > o.lease_expires_at THEN x.lease_expires_at ELSE o.lease_expires_at END,
		deadline = x.deadline, stage = x.stage, progress = x.progress, last_error = x.last_error,
		-- A kept payload column (storage.Kept bits) is set to itself: its stored value and TOAST stay.
		data = CASE WHEN x.kept & 1 <> 0 THEN o.data ELSE x.data END,
		secrets = CASE WHEN x.kept & 2 <> 0 THEN o.secrets ELSE NULLIF(x.secrets, ''::bytea) END
	FROM l x
	WHERE o.id = x.id AND o.version = x.version AND (x.owner = '' OR o.lease_owner = x.owner)
	RETURNING x.req, o.version, o.updated_at, o.lease_expires_at, o.id, o.instance_id
), e AS (
	-- An event is its operation's: its operation and instance come from the updated row, so
	-- the batch does not send two IDs per event.
	INSERT INTO events (` + eventWriteCols + `)
	SELECT u.id, u.instance_id, ` + prefixed("ev.", eventOwnCols) + `
	FROM unnest(?::int[], ?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::bigint[], ?::timestamptz[])
		AS ev(req, ` + eventOwnCols + `)
	JOIN u ON u.req = ev.req
), i AS (
	-- The instance fields the calls' steps deferred (storage.Operation.Instance), for the
	-- operations written. An instance is one operation's at a time (an operation of the
	-- provisioner has none: its instance_id is a runtime's), so no other batch locks it.
	` + instanceFieldsUpdate + `
	FROM unnest(?::int[], ?::text[], ?::text[], ?::text[]) AS f(req, runtime_id, dashboard_url, shoot_name)
	JOIN u ON u.req = f.req
	WHERE ` + instanceFieldsWhere + `
), r AS (
	-- Likewise the provisioner's runtime fields (storage.Operation.Runtime).
	` + runtimeFieldsUpdate + `
	FROM unnest(?::int[], ?::text[], ?::bytea[]) AS f(req, compass_runtime_id, kubeconfig)
	JOIN u ON u.req = f.req
	WHERE ` + runtimeFieldsWhere + `
)
SELECT req, version, updated_at, lease_expires_at FROM u`

// instanceFieldsUpdate and instanceFieldsWhere write the instance fields f sets (a NULL
// leaves one as it is) on the instance t of the written operation u, unless it has them.
const (
	instanceFieldsUpdate = `UPDATE instances t SET runtime_id = COALESCE(f.runtime_id, t.runtime_id),
		dashboard_url = COALESCE(f.dashboard_url, t.dashboard_url), shoot_name = COALESCE(f.shoot_name, t.shoot_name),
		updated_at = u.updated_at, version = t.version + 1`
	instanceFieldsWhere = `t.instance_id = u.instance_id AND (t.runtime_id <> COALESCE(f.runtime_id, t.runtime_id)
		OR t.dashboard_url <> COALESCE(f.dashboard_url, t.dashboard_url) OR t.shoot_name <> COALESCE(f.shoot_name, t.shoot_name))`
	// runtimeFieldsUpdate and runtimeFieldsWhere are the same for the runtime t of u.
	runtimeFieldsUpdate = `UPDATE runtimes t SET compass_runtime_id = COALESCE(f.compass_runtime_id, t.compass_runtime_id),
		kubeconfig = COALESCE(f.kubeconfig, t.kubeconfig), updated_at = u.updated_at, version = t.version + 1`
	runtimeFieldsWhere = `t.id = u.instance_id AND (t.compass_runtime_id <> COALESCE(f.compass_runtime_id, t.compass_runtime_id)
		OR t.kubeconfig IS DISTINCT FROM COALESCE(f.kubeconfig, t.kubeconfig))`
)

// prefixed qualifies each column of a comma-separated list with prefix (the batch joins u, whose
// columns would otherwise clash).
func prefixed(prefix, cols string) string {
	return prefix + strings.ReplaceAll(cols, ", ", ", "+prefix)
}

// startTxBatcher starts SQLite's group commit: one executor (SQLite has one writer connection)
// writes the saves waiting together in one transaction (saveProgressTx), so several workers'
// transitions share one commit and the pages they all touch (the events table's last page and
// its indexes) are written to the WAL once.
func (s *Store) startTxBatcher() {
	s.saves = startCoalescer(1, maxTxSaveBatch, func(calls saveBatch) { s.writeCalls(calls, s.saveProgressTx) })
}

func (s *Store) startBatcher(ctx context.Context) error {
	stmt, err := s.batch.PreparexContext(ctx, s.d.rebind(saveProgressBatchSQL))
	if err != nil {
		return fmt.Errorf("preparing batched save progress statement: %w", err)
	}
	s.saveBatchStmt = stmt
	s.saves = startBulkCoalescer(saveExecutors, maxSaveBatch, secondSaveBatch, func(calls saveBatch) { s.writeCalls(calls, s.saveProgressBatch) })
	return nil
}

// batchWriter writes several calls at once (one statement, or one transaction); a nil result
// is a call that matched no row.
type batchWriter func(context.Context, saveBatch) ([]*storage.Operation, error)

// writeCalls writes a batch of calls with write; a second call for an operation already in it
// is written after it, on its own (its version follows the first's write).
func (s *Store) writeCalls(calls saveBatch, write batchWriter) {
	batch, later := firstOfEach(calls, func(c saveCall) string { return c.op.ID })
	s.writeBatch(batch, write)
	for _, c := range later {
		s.writeBatch(saveBatch{c}, write)
	}
}

func (s *Store) writeBatch(batch saveBatch, write batchWriter) {
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	one := func(c *pending[saveCall, *storage.Operation]) {
		op, err := s.saveProgressOne(ctx, c.req.op, c.req.w, c.req.events)
		c.answer(&op, err)
	}
	if len(batch) == 1 {
		one(batch[0])
		return
	}
	results, err := write(ctx, batch)
	if err != nil {
		s.log.WithError(err).WithField("calls", len(batch)).Debug("batched save progress failed; writing the calls one by one")
		for _, c := range batch {
			one(c)
		}
		return
	}
	for i, c := range batch {
		switch {
		case results[i] != nil:
			c.answer(results[i], nil)
		default:
			c.answer(nil, s.missingOrConflict(ctx, "operations", "id", c.req.op.ID))
		}
	}
}

// optional is a NULL for a nil string.
func optional(s *string) sql.NullString {
	if s == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: *s, Valid: true}
}

func nullTimeString(t *time.Time) sql.NullString {
	if t == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: micro(*t).Format(time.RFC3339Nano), Valid: true}
}

// saveProgressBatch writes all calls in one statement; results[i] is nil where call i matched
// no row (conflict or missing).
func (s *Store) saveProgressBatch(ctx context.Context, batch saveBatch) ([]*storage.Operation, error) {
	n := len(batch)
	events := 0
	for _, c := range batch {
		events += len(c.req.events)
	}
	var (
		reqs                                      = make([]int32, n)
		ids, owners, states, descs, stages, lasts = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		progress                                  = make([][]byte, n)
		versions                                  = make([]int64, n)
		dues, leases, deadlines, data             = make([]sql.NullString, n), make([]sql.NullString, n), make([]sql.NullString, n), make([]sql.NullString, n)
		secrets                                   = make([][]byte, n)
		kept                                      = make([]int32, n)
		evReq                                     = make([]int32, 0, events)
		evStep, evStage, evType, evMsg            = make([]string, 0, events), make([]string, 0, events), make([]string, 0, events), make([]string, 0, events)
		evTime                                    = make(pgTimeArray, 0, events)
		evDur, evWait                             = make([]int64, 0, events), make([]int64, 0, events)
		instReq                                   []int32
		instRuntime, instDashboard, instShoot     pgNullTextArray
		rtReq                                     []int32
		rtCompass                                 pgNullTextArray
		rtKubeconfig                              pgByteaArray
	)
	now := time.Now()
	for i, c := range batch {
		r := c.req
		op := r.op
		reqs[i], ids[i], versions[i], owners[i] = int32(i), op.ID, op.Version, op.LeaseOwner
		states[i], descs[i], stages[i], lasts[i], progress[i] = string(op.State), op.Description, op.Stage, op.LastError, r.w.progress
		dues[i] = nullTimeString(op.DueAt)
		if op.LeaseOwner != "" {
			leases[i] = nullTimeString(op.LeaseExpiresAt)
		}
		if !op.Deadline.IsZero() {
			deadlines[i] = nullTimeString(&op.Deadline)
		}
		if d, ok := r.w.data.(string); ok {
			data[i] = sql.NullString{String: d, Valid: true}
		}
		if sec, ok := r.w.secrets.([]byte); ok {
			secrets[i] = sec
		}
		kept[i] = int32(op.Kept)
		if f := op.Instance; f != nil {
			instReq = append(instReq, int32(i))
			instRuntime, instDashboard, instShoot = append(instRuntime, optional(f.RuntimeID)), append(instDashboard, optional(f.DashboardURL)), append(instShoot, optional(f.ShootName))
		}
		if f := op.Runtime; f != nil {
			kc, _ := r.w.kubeconfig.([]byte)
			rtReq, rtCompass, rtKubeconfig = append(rtReq, int32(i)), append(rtCompass, optional(f.CompassRuntimeID)), append(rtKubeconfig, kc)
		}
		for _, e := range r.events {
			e = defaultEvent(e, op.Operation, now)
			evReq = append(evReq, int32(i))
			evStep, evStage = append(evStep, e.Step), append(evStage, e.Stage)
			evType, evMsg = append(evType, string(e.Type)), append(evMsg, e.Message)
			evDur, evWait = append(evDur, e.Duration.Microseconds()), append(evWait, e.Wait.Microseconds())
			evTime = append(evTime, sql.NullString{String: e.CreatedAt.Format(time.RFC3339Nano), Valid: true})
		}
	}
	a := s.d.Array
	type (
		text     = pgTextArray
		nullText = pgNullTextArray
	)
	args := []any{
		a(reqs), text(ids), a(versions), text(owners), text(states), text(descs), pgTimeArray(dues), pgTimeArray(leases), pgTimeArray(deadlines), text(stages),
		pgByteTextArray(progress), text(lasts), nullText(data), pgByteaArray(secrets), a(kept),
		s.d.timeArg(now),
		a(evReq), text(evStep), text(evStage), text(evType), text(evMsg), a(evDur), a(evWait), evTime,
		a(instReq), instRuntime, instDashboard, instShoot,
		a(rtReq), rtCompass, rtKubeconfig,
	}
	rows, err := s.saveBatchStmt.QueryxContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	// Only what the database decided comes back; the rest is what the caller wrote, so the
	// batch does not scan and decode whole rows.
	out := make([]*storage.Operation, n)
	for rows.Next() {
		var (
			req       int
			version   int64
			updatedAt dbTime
			leaseExp  dbTime
		)
		if err := rows.Scan(&req, &version, &updatedAt, &leaseExp); err != nil {
			return nil, err
		}
		if req < 0 || req >= n {
			return nil, fmt.Errorf("batched save returned unknown request %d", req)
		}
		op := written(batch[req].req.op.Operation, version, updatedAt.Time, leaseExp.ptr())
		out[req] = &op
	}
	return out, rows.Err()
}

// saveProgressTx writes all calls in one transaction (dialects without arrays); results[i] is
// nil where call i matched no row (it wrote nothing; the others' writes stand).
func (s *Store) saveProgressTx(ctx context.Context, batch saveBatch) ([]*storage.Operation, error) {
	tx, err := s.w.BeginTxx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer rollback(tx)
	now := time.Now()
	out := make([]*storage.Operation, len(batch))
	for i, c := range batch {
		saved, ok, err := s.saveInTx(ctx, tx, c.req.op, c.req.w, s.saveProgressArgs(c.req.op, c.req.w), c.req.events, now)
		if err != nil {
			return nil, err
		}
		if ok {
			out[i] = &saved
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return out, nil
}

// written is op as a read would return it after the save: the new version, update time and
// lease expiry from the database, times at the database's microsecond precision.
func written(op storage.Operation, version int64, updatedAt time.Time, leaseExp *time.Time) storage.Operation {
	op.Version, op.UpdatedAt, op.LeaseExpiresAt = version, micro(updatedAt), leaseExp
	op.CreatedAt, op.Deadline = micro(op.CreatedAt), micro(op.Deadline)
	if op.DueAt != nil {
		due := micro(*op.DueAt)
		op.DueAt = &due
	}
	if op.LeaseOwner == "" {
		op.LeaseExpiresAt = nil
	}
	return op
}
