package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kyma-project/kyma-environment-broker/internal/observe"
	"sort"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/jmoiron/sqlx"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

const opCols = "id, instance_id, type, state, description, created_at, updated_at, version, due_at, lease_owner, lease_expires_at, deadline, stage, progress, last_error, data, secrets"

var activeStates = []string{string(storage.StatePending), string(storage.StateInProgress)}

// operationRow is where a row's operation columns (opCols, in order) are scanned.
type operationRow struct {
	op                                  storage.Operation
	state                               string
	created, updated, due, lease, dline dbTime
	owner, data                         sql.NullString
	progress                            string
	secrets                             []byte
}

func (d *operationRow) dest() []any {
	return []any{&d.op.ID, &d.op.InstanceID, &d.op.Type, &d.state, &d.op.Description, &d.created, &d.updated, &d.op.Version,
		&d.due, &d.owner, &d.lease, &d.dline, &d.op.Stage, &d.progress, &d.op.LastError, &d.data, &d.secrets}
}

// operation is the scanned row as an Operation (its progress decoded, its secrets decrypted).
func (s *Store) operation(d *operationRow) (storage.Operation, error) {
	op := d.op
	op.State = storage.OperationState(d.state)
	op.CreatedAt, op.UpdatedAt = d.created.value(), d.updated.value()
	op.DueAt, op.LeaseExpiresAt, op.Deadline = d.due.ptr(), d.lease.ptr(), d.dline.value()
	op.LeaseOwner = d.owner.String
	if d.data.Valid && d.data.String != "" {
		op.Data = json.RawMessage(d.data.String)
	}
	if d.progress != "" {
		var err error
		if op.Progress, err = decodeProgress([]byte(d.progress)); err != nil {
			return storage.Operation{}, fmt.Errorf("operation %s: decoding progress: %w", op.ID, err)
		}
	}
	sec, err := s.decryptSecrets(d.secrets)
	if err != nil {
		return storage.Operation{}, fmt.Errorf("operation %s: %w", op.ID, err)
	}
	op.Secrets = sec
	return op, nil
}

func (s *Store) scanOperation(r rowScanner) (storage.Operation, error) {
	var d operationRow
	if err := r.Scan(d.dest()...); err != nil {
		return storage.Operation{}, err
	}
	return s.operation(&d)
}

func (s *Store) scanOperations(rows *sqlx.Rows) ([]storage.Operation, error) {
	defer rows.Close()
	out := []storage.Operation{}
	for rows.Next() {
		op, err := s.scanOperation(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, op)
	}
	return out, rows.Err()
}

// opWrite holds an operation's encoded column values.
type opWrite struct {
	// progress is the encoded document; the batched save sends it as it is (a byte array
	// element), the other statements as a string.
	progress []byte
	data     any
	secrets  any
	// kubeconfig is the encrypted storage.RuntimeFields.Kubeconfig of a save (nil: none).
	kubeconfig any
}

func (s *Store) encodeOperation(op storage.Operation) (opWrite, error) {
	progress, err := encodeProgress(make([]byte, 0, 64+64*len(op.Progress.Steps)), op.Progress)
	if err != nil {
		return opWrite{}, fmt.Errorf("encoding progress: %w", err)
	}
	sec, err := s.encryptSecrets(op.Secrets)
	if err != nil {
		return opWrite{}, err
	}
	return opWrite{progress: progress, data: nullJSON(op.Data), secrets: sec}, nil
}

// encodeSave is encodeOperation for SaveProgress: kept columns are neither encoded nor
// encrypted (they are not written).
func (s *Store) encodeSave(op saveOp) (opWrite, error) {
	kept := op.Kept
	if kept&storage.KeepData != 0 {
		op.Data = nil
	}
	if kept&storage.KeepSecrets != 0 {
		op.Secrets = nil
	}
	w, err := s.encodeOperation(op.Operation)
	if err != nil {
		return opWrite{}, err
	}
	if f := op.Runtime; f != nil {
		if w.kubeconfig, err = s.encryptKubeconfig(f.Kubeconfig); err != nil {
			return opWrite{}, err
		}
	}
	return w, nil
}

func (s *Store) InsertOperation(ctx context.Context, op storage.Operation) (storage.Operation, error) {
	out, err := s.insertOperation(ctx, s.w, op)
	if err != nil {
		return storage.Operation{}, fmt.Errorf("inserting operation %s: %w", op.ID, err)
	}
	s.notify(ctx)
	return out, nil
}

// operationInsert is the INSERT of op returning its columns (opCols), with ? placeholders.
func (s *Store) operationInsert(op storage.Operation) (string, []any, error) {
	if op.ID == "" {
		return "", nil, errors.New("operation ID is empty")
	}
	w, err := s.encodeOperation(op)
	if err != nil {
		return "", nil, err
	}
	now := micro(time.Now())
	created := now
	if !op.CreatedAt.IsZero() {
		created = op.CreatedAt
	}
	return sq.Insert("operations").
		Columns("id", "instance_id", "type", "state", "description", "created_at", "updated_at", "version", "due_at",
			"lease_owner", "lease_expires_at", "deadline", "stage", "progress", "last_error", "data", "secrets").
		Values(op.ID, op.InstanceID, op.Type, string(op.State), op.Description, s.d.timeArg(created), s.d.timeArg(now), 1,
			s.d.nullTimeArg(op.DueAt), nullString(op.LeaseOwner), s.d.nullTimeArg(op.LeaseExpiresAt),
			s.d.zeroNullTimeArg(op.Deadline), op.Stage, string(w.progress), op.LastError, w.data, w.secrets).
		Suffix("RETURNING " + opCols).ToSql()
}

// insertOperation inserts through q: the database, or a transaction that inserts more.
func (s *Store) insertOperation(ctx context.Context, q sqlx.QueryerContext, op storage.Operation) (storage.Operation, error) {
	// The request or step creating the operation links to the operation's own trace.
	observe.LinkOperation(ctx, op.ID)
	query, args, err := s.operationInsert(op)
	if err != nil {
		return storage.Operation{}, err
	}
	out, err := s.scanOperation(q.QueryRowxContext(ctx, s.d.rebind(query), args...))
	if err != nil {
		if s.d.IsUniqueViolation(err) {
			return storage.Operation{}, storage.ErrAlreadyExists
		}
		return storage.Operation{}, err
	}
	return out, nil
}

func (s *Store) GetOperation(ctx context.Context, id string) (storage.Operation, error) {
	op, err := s.scanOperation(s.r.QueryRowxContext(ctx, s.d.rebind("SELECT "+opCols+" FROM operations WHERE id = ?"), id))
	if errors.Is(err, sql.ErrNoRows) {
		err = storage.ErrNotFound
	}
	if err != nil {
		return storage.Operation{}, fmt.Errorf("getting operation %s: %w", id, err)
	}
	return op, nil
}

func (s *Store) UpdateOperation(ctx context.Context, op storage.Operation) (storage.Operation, error) {
	out, err := s.updateOperation(ctx, op)
	if err != nil {
		return storage.Operation{}, fmt.Errorf("updating operation %s (version %d): %w", op.ID, op.Version, err)
	}
	return out, nil
}

func (s *Store) updateOperation(ctx context.Context, op storage.Operation) (storage.Operation, error) {
	w, err := s.encodeOperation(op)
	if err != nil {
		return storage.Operation{}, err
	}
	q, args, err := s.sb().Update("operations").
		Set("instance_id", op.InstanceID).
		Set("type", op.Type).
		Set("state", string(op.State)).
		Set("description", op.Description).
		Set("updated_at", s.d.timeArg(time.Now())).
		Set("version", sq.Expr("version + 1")).
		Set("due_at", s.d.nullTimeArg(op.DueAt)).
		Set("lease_owner", nullString(op.LeaseOwner)).
		Set("lease_expires_at", s.d.nullTimeArg(op.LeaseExpiresAt)).
		Set("deadline", s.d.zeroNullTimeArg(op.Deadline)).
		Set("stage", op.Stage).
		Set("progress", string(w.progress)).
		Set("last_error", op.LastError).
		Set("data", w.data).
		Set("secrets", w.secrets).
		Where(sq.Eq{"id": op.ID, "version": op.Version}).
		Suffix("RETURNING " + opCols).ToSql()
	if err != nil {
		return storage.Operation{}, err
	}
	out, err := s.scanOperation(s.writes.queryRowx(ctx, q, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return storage.Operation{}, s.missingOrConflict(ctx, "operations", "id", op.ID)
	}
	return out, err
}

func (s *Store) ListOperations(ctx context.Context, f storage.OperationFilter) (storage.Page[storage.Operation], error) {
	if err := checkLists("listing operations", len(f.IDs), len(f.InstanceIDs), len(f.Types), len(f.States)); err != nil {
		return storage.Page[storage.Operation]{}, err
	}
	page, err := s.listOperations(ctx, f)
	if err != nil {
		return storage.Page[storage.Operation]{}, fmt.Errorf("listing operations: %w", err)
	}
	return page, nil
}

func (s *Store) listOperations(ctx context.Context, f storage.OperationFilter) (storage.Page[storage.Operation], error) {
	states := make([]string, len(f.States))
	for i, st := range f.States {
		states[i] = string(st)
	}
	where := sq.And{}
	where = eqIfAny(where, "id", f.IDs)
	where = eqIfAny(where, "instance_id", f.InstanceIDs)
	where = eqIfAny(where, "type", f.Types)
	where = eqIfAny(where, "state", states)
	return listPage(ctx, s, pageQuery{table: "operations", cols: opCols, where: where, order: []string{"created_at DESC", "id DESC"}, paging: f.Paging}, s.scanOperation)
}

// claimRows runs a claim on the claim pool (Config.ClaimDB; the writer without one).
func (s *Store) claimRows(ctx context.Context, q string, args []any) ([]storage.Operation, error) {
	rows, err := s.claimed.queryx(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return s.scanOperations(rows)
}

// claimable is the condition for an operation that may be leased at now.
func (s *Store) claimable(now time.Time) sq.And {
	n := s.d.timeArg(now)
	return sq.And{
		sq.Eq{"state": activeStates},
		sq.LtOrEq{"due_at": n},
		sq.Or{sq.Eq{"lease_owner": nil}, sq.Lt{"lease_expires_at": n}},
	}
}

// ClaimOperations leases due operations in one statement. On PostgreSQL the sub-query locks
// the rows it picks with FOR UPDATE SKIP LOCKED so concurrent claims pass each other; SQLite has
// a single writer connection, so claims never overlap.
func (s *Store) ClaimOperations(ctx context.Context, r storage.ClaimRequest) ([]storage.Operation, error) {
	ops, err := s.claimOperations(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("claiming operations for %s: %w", r.Owner, err)
	}
	return ops, nil
}

func (s *Store) claimOperations(ctx context.Context, r storage.ClaimRequest) ([]storage.Operation, error) {
	if r.Owner == "" {
		return nil, errors.New("owner is empty")
	}
	if r.Limit <= 0 {
		return nil, fmt.Errorf("invalid Limit %d: must be positive", r.Limit)
	}
	where := s.claimable(r.Now)
	if r.Own {
		where = sq.And{sq.Eq{"state": activeStates}, sq.Eq{"lease_owner": r.Owner}}
	}
	where = eqIfAny(where, "type", r.Types)
	if !r.CreatedAfter.IsZero() {
		where = append(where, sq.GtOrEq{"created_at": s.d.timeArg(r.CreatedAfter)})
	}
	sub := sq.Select("id").From("operations").Where(where).OrderBy("due_at", "id").Limit(uint64(r.Limit))
	if s.d.SkipLocked {
		sub = sub.Suffix("FOR UPDATE SKIP LOCKED")
	}
	q, args, err := s.sb().Update("operations").
		Set("lease_owner", r.Owner).
		Set("lease_expires_at", s.d.timeArg(r.LeaseUntil)).
		// While leased, an operation is next due when its lease expires: claims then only
		// scan operations that are really due, and a dead holder's work is due on time.
		Set("due_at", s.d.timeArg(r.LeaseUntil)).
		Set("version", sq.Expr("version + 1")).
		Where(sq.Expr("id IN (?)", sub)).
		Suffix("RETURNING " + opCols).ToSql()
	if err != nil {
		return nil, err
	}
	ops, err := s.claimRows(ctx, q, args)
	if err != nil {
		return nil, err
	}
	// All claimed operations are now due at LeaseUntil; order by ID for determinism.
	sort.Slice(ops, func(i, j int) bool { return ops[i].ID < ops[j].ID })
	return ops, nil
}

// saveProgressSet is the SET list shared by both SaveProgress forms. Arguments, in order:
// state, description, updated_at, due_at, owner (NULL releases), owner (again), lease_expires_at
// (twice), deadline, stage, progress, last_error, keep data, data, keep secrets, secrets. The
// lease expiry never moves backwards while the lease is kept (ExtendLeases does not bump the
// version, so op may carry an older expiry than the row). A kept payload column is set to itself:
// PostgreSQL then keeps its stored value (and TOAST) instead of writing a copy.
const saveProgressSet = `state = ?, description = ?, updated_at = ?, version = version + 1, due_at = ?,
	lease_owner = ?,
	lease_expires_at = CASE WHEN CAST(? AS INTEGER) IS NULL THEN NULL WHEN ? > lease_expires_at THEN ? ELSE lease_expires_at END,
	deadline = ?, stage = ?, progress = ?, last_error = ?,
	data = CASE WHEN ? THEN data ELSE ? END, secrets = CASE WHEN ? THEN secrets ELSE ? END`

// saveProgressWhere: id, version, owner, owner. An empty owner in op means the caller releases
// the lease; then the version alone guards the write (claims bump the version).
const saveProgressWhere = `id = ? AND version = ? AND (? = '' OR lease_owner = ?)`

// saveProgressCTE writes the operation and its events in one statement (PostgreSQL). Events are
// passed as arrays and only inserted if the update matched.
var saveProgressCTE = `WITH u AS (
	UPDATE operations SET ` + saveProgressSet + `
	WHERE ` + saveProgressWhere + `
	RETURNING version, updated_at, lease_expires_at, id, instance_id
), e AS (
	-- The events are the operation's own (see the batched save): their IDs come from the row.
	INSERT INTO events (` + eventWriteCols + `)
	SELECT u.id, u.instance_id, ` + prefixed("ev.", eventOwnCols) + `
	FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::bigint[], ?::timestamptz[])
		AS ev(` + eventOwnCols + `)
	CROSS JOIN u
), i AS (
	-- The instance fields the step deferred (storage.Operation.Instance), if the update matched.
	` + instanceFieldsUpdate + `
	FROM u, (SELECT CAST(? AS BOOLEAN) AS set, CAST(? AS TEXT) AS runtime_id, CAST(? AS TEXT) AS dashboard_url,
		CAST(? AS TEXT) AS shoot_name) f
	WHERE f.set AND ` + instanceFieldsWhere + `
), r AS (
	-- Likewise the provisioner's runtime fields (storage.Operation.Runtime).
	` + runtimeFieldsUpdate + `
	FROM u, (SELECT CAST(? AS TEXT) AS compass_runtime_id, CAST(? AS BYTEA) AS kubeconfig) f
	WHERE ` + runtimeFieldsWhere + `
)
SELECT version, updated_at, lease_expires_at FROM u`

func (s *Store) saveProgressArgs(op saveOp, w opWrite) []any {
	owner := nullString(op.LeaseOwner)
	var exp any
	if op.LeaseOwner != "" {
		exp = s.d.nullTimeArg(op.LeaseExpiresAt)
	}
	// "? IS NULL" must be NULL only when releasing; use a non-NULL marker when an owner is kept.
	var releasing any
	if op.LeaseOwner != "" {
		releasing = 0
	}
	return []any{
		string(op.State), op.Description, s.d.timeArg(time.Now()), s.d.nullTimeArg(op.DueAt),
		owner, releasing, exp, exp,
		s.d.zeroNullTimeArg(op.Deadline), op.Stage, string(w.progress), op.LastError,
		op.Kept&storage.KeepData != 0, w.data, op.Kept&storage.KeepSecrets != 0, w.secrets,
		op.ID, op.Version, op.LeaseOwner, op.LeaseOwner,
	}
}

// saveOp is what one SaveProgress call writes: the operation and what rides with it.
type saveOp struct {
	storage.Operation
	storage.Save
}

// SaveProgress writes op and appends events atomically if op.Version is current and op's lease
// owner (when set) still holds the lease.
func (s *Store) SaveProgress(ctx context.Context, op storage.Operation, with storage.Save, events []storage.Event) (storage.Operation, error) {
	out, err := s.saveProgress(ctx, saveOp{op, with}, events)
	if err != nil {
		return storage.Operation{}, fmt.Errorf("saving progress of operation %s (version %d): %w", op.ID, op.Version, err)
	}
	return out, nil
}

func (s *Store) saveProgress(ctx context.Context, op saveOp, events []storage.Event) (storage.Operation, error) {
	w, err := s.encodeSave(op)
	if err != nil {
		return storage.Operation{}, err
	}
	if s.saves != nil {
		saved, err := s.saves.submit(ctx, saveCall{op: op, w: w, events: events})
		if err != nil {
			return storage.Operation{}, err
		}
		return *saved, nil
	}
	return s.saveProgressOne(ctx, op, w, events)
}

// saveProgressOne writes one call: with the single CTE statement where the dialect has arrays,
// else in a transaction.
func (s *Store) saveProgressOne(ctx context.Context, op saveOp, w opWrite, events []storage.Event) (storage.Operation, error) {
	args := s.saveProgressArgs(op, w)
	now := time.Now()
	if s.saveProgressStmt != nil {
		n := len(events)
		steps, stages, types, msgs := make(pgTextArray, n), make(pgTextArray, n), make(pgTextArray, n), make(pgTextArray, n)
		durs, waits, created := make([]int64, n), make([]int64, n), make(pgTimeArray, n)
		for i, e := range events {
			e = defaultEvent(e, op.Operation, now)
			steps[i], stages[i], types[i], msgs[i] = e.Step, e.Stage, string(e.Type), e.Message
			durs[i], waits[i] = e.Duration.Microseconds(), e.Wait.Microseconds()
			created[i] = sql.NullString{String: e.CreatedAt.Format(time.RFC3339Nano), Valid: true}
		}
		a := s.d.Array
		args = append(args, steps, stages, types, msgs, a(durs), a(waits), created)
		var inst storage.InstanceFields
		if op.Instance != nil {
			inst = *op.Instance
		}
		var rt storage.RuntimeFields
		if op.Runtime != nil {
			rt = *op.Runtime
		}
		args = append(args, op.Instance != nil, optional(inst.RuntimeID), optional(inst.DashboardURL), optional(inst.ShootName),
			optional(rt.CompassRuntimeID), w.kubeconfig)
		// Only what the database decides comes back: the rest is what the caller wrote.
		var (
			version           int64
			updated, leaseExp dbTime
		)
		err := s.saveProgressStmt.QueryRowxContext(ctx, args...).Scan(&version, &updated, &leaseExp)
		if errors.Is(err, sql.ErrNoRows) {
			return storage.Operation{}, s.missingOrConflict(ctx, "operations", "id", op.ID)
		}
		if err != nil {
			return storage.Operation{}, err
		}
		return written(op.Operation, version, updated.Time, leaseExp.ptr()), nil
	}

	tx, err := s.w.BeginTxx(ctx, nil)
	if err != nil {
		return storage.Operation{}, err
	}
	defer rollback(tx)
	out, ok, err := s.saveInTx(ctx, tx, op, w, args, events, now)
	if err != nil {
		return storage.Operation{}, err
	}
	if !ok {
		rollback(tx)
		return storage.Operation{}, s.missingOrConflict(ctx, "operations", "id", op.ID)
	}
	if err := tx.Commit(); err != nil {
		return storage.Operation{}, err
	}
	return out, nil
}

// saveInTx is one save in the transaction form (dialects without arrays): the update and, if
// it matched (ok), the events. A save that matched no row wrote nothing.
func (s *Store) saveInTx(ctx context.Context, tx *sqlx.Tx, op saveOp, w opWrite, args []any, events []storage.Event, now time.Time) (out storage.Operation, ok bool, err error) {
	var (
		version           int64
		updated, leaseExp dbTime
	)
	err = tx.StmtxContext(ctx, s.updateStmt).QueryRowxContext(ctx, args...).Scan(&version, &updated, &leaseExp)
	if errors.Is(err, sql.ErrNoRows) {
		return storage.Operation{}, false, nil
	}
	if err != nil {
		return storage.Operation{}, false, err
	}
	insert := tx.StmtxContext(ctx, s.eventStmt)
	for _, e := range events {
		e = defaultEvent(e, op.Operation, now)
		if _, err := insert.ExecContext(ctx, e.OperationID, e.InstanceID, e.Step, e.Stage, string(e.Type), e.Message,
			e.Duration.Microseconds(), e.Wait.Microseconds(), s.d.timeArg(e.CreatedAt)); err != nil {
			return storage.Operation{}, false, err
		}
	}
	// The instance's and the runtime's fields the steps deferred (storage.Save.Instance,
	// Runtime).
	for _, f := range []struct {
		table, idCol string
		cols         []column
	}{{"instances", "instance_id", instanceColumns(op.Instance)}, {"runtimes", "id", runtimeColumns(op.Runtime, w.kubeconfig)}} {
		upd, ok := s.columnsUpdate(f.table, f.idCol, op.InstanceID, f.cols, updated.Time)
		if !ok {
			continue
		}
		q, qargs, err := upd.ToSql()
		if err != nil {
			return storage.Operation{}, false, err
		}
		if _, err := tx.ExecContext(ctx, q, qargs...); err != nil {
			return storage.Operation{}, false, err
		}
	}
	return written(op.Operation, version, updated.Time, leaseExp.ptr()), true, nil
}

// saveProgressUpdate is SaveProgress's update in the transaction form; it returns only what
// the database decides.
const saveProgressUpdate = "UPDATE operations SET " + saveProgressSet + " WHERE " + saveProgressWhere + " RETURNING version, updated_at, lease_expires_at"

// insertEventSQL inserts one event.
const insertEventSQL = "INSERT INTO events (" + eventWriteCols + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"

// defaultEvent is a saved event as written: its operation and instance are op's (SaveProgress
// appends the operation's own events), its time now when unset.
func defaultEvent(e storage.Event, op storage.Operation, now time.Time) storage.Event {
	e.OperationID, e.InstanceID = op.ID, op.InstanceID
	if e.CreatedAt.IsZero() {
		e.CreatedAt = now
	}
	e.CreatedAt = micro(e.CreatedAt)
	return e
}

func (s *Store) ExtendLeases(ctx context.Context, owner string, ids []string, until time.Time) ([]string, error) {
	if len(ids) == 0 {
		return []string{}, nil
	}
	q, args, err := s.sb().Update("operations").
		Set("lease_expires_at", s.d.timeArg(until)).
		Set("due_at", s.d.timeArg(until)).
		Where(s.lockedInIDOrder(sq.Eq{"lease_owner": owner, "id": ids, "state": activeStates})).
		Suffix("RETURNING id").ToSql()
	if err != nil {
		return nil, fmt.Errorf("extending leases of %s: %w", owner, err)
	}
	held := []string{}
	// Not prepared: the IN list's length, and so the text, changes with the leases held.
	if err := s.w.SelectContext(ctx, &held, q, args...); err != nil {
		return nil, fmt.Errorf("extending leases of %s: %w", owner, err)
	}
	sort.Strings(held)
	return held, nil
}

func (s *Store) ReleaseLeases(ctx context.Context, owner string, ids []string, dueAt time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := s.releaseLeases(ctx, sq.Eq{"lease_owner": owner, "id": ids, "state": activeStates}, dueAt, true); err != nil {
		return fmt.Errorf("releasing leases of %s: %w", owner, err)
	}
	return nil
}

func (s *Store) ReclaimLeases(ctx context.Context, owner string, dueAt time.Time, keep []string) ([]string, error) {
	if owner == "" {
		return nil, errors.New("reclaiming leases: owner is empty")
	}
	// No wake-up: a wake-up made one live replica claim them all at once
	// (storage.Operations.ReclaimLeases).
	ids, err := s.releaseLeases(ctx, sq.And{sq.Eq{"lease_owner": owner, "state": activeStates}, sq.NotEq{"id": keep}}, dueAt, false)
	if err != nil {
		return nil, fmt.Errorf("reclaiming leases of %s: %w", owner, err)
	}
	return ids, nil
}

// releaseLeases drops the leases of the operations matching where, makes them due at dueAt and,
// if wake, wakes the workers; it returns the released IDs in order.
func (s *Store) releaseLeases(ctx context.Context, where sq.Sqlizer, dueAt time.Time, wake bool) ([]string, error) {
	return s.makeDue(ctx, s.writes, s.sb().Update("operations").
		Set("lease_owner", nil).
		Set("lease_expires_at", nil).
		Set("due_at", s.d.timeArg(dueAt)), where, wake)
}

// makeDue runs upd on db's sessions on the operations matching where (rows locked in ID
// order), wakes the workers when it changed any (and wake) and returns their IDs in order.
func (s *Store) makeDue(ctx context.Context, db *stmtCache, upd sq.UpdateBuilder, where sq.Sqlizer, wake bool) ([]string, error) {
	q, args, err := upd.Where(s.lockedInIDOrder(where)).Suffix("RETURNING id").ToSql()
	if err != nil {
		return nil, err
	}
	rows, err := db.queryx(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ids := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if wake && len(ids) > 0 {
		s.notify(ctx)
	}
	sort.Strings(ids)
	return ids, nil
}

// lockedInIDOrder is the condition "id IN (operations matching where)" for a statement that
// writes several operations. On PostgreSQL the sub-query locks the rows in ID order first:
// every multi-row writer (lease extension, release, the sweeper, batched saves) then takes its
// row locks in one order, so two of them never deadlock. SQLite has a single writer.
func (s *Store) lockedInIDOrder(where sq.Sqlizer) sq.Sqlizer {
	sub := sq.Select("id").From("operations").Where(where).OrderBy("id")
	if s.d.SkipLocked {
		sub = sub.Suffix("FOR UPDATE")
	}
	return sq.Expr("id IN (?)", sub)
}

func (s *Store) NextDueAt(ctx context.Context, types []string) (*time.Time, error) {
	where := sq.And{sq.Eq{"state": activeStates}, sq.NotEq{"due_at": nil}}
	where = eqIfAny(where, "type", types)
	q, args, err := s.sb().Select("MIN(due_at)").From("operations").Where(where).ToSql()
	if err != nil {
		return nil, fmt.Errorf("finding next due operation: %w", err)
	}
	var t dbTime
	if err := s.r.QueryRowxContext(ctx, q, args...).Scan(&t); err != nil {
		return nil, fmt.Errorf("finding next due operation: %w", err)
	}
	return t.ptr(), nil
}

func (s *Store) FailOverdue(ctx context.Context, now time.Time, message string) ([]storage.Operation, error) {
	ops, err := s.failOverdue(ctx, now, message)
	if err != nil {
		return nil, fmt.Errorf("failing overdue operations: %w", err)
	}
	return ops, nil
}

func (s *Store) failOverdue(ctx context.Context, now time.Time, message string) ([]storage.Operation, error) {
	n := s.d.timeArg(now)
	// Rows a live worker writes right now are left to the next sweep (SKIP LOCKED); the rest
	// are locked in ID order like every multi-row writer's.
	sel := s.sb().Select(opCols).From("operations").Where(sq.And{
		sq.Eq{"state": activeStates},
		sq.Lt{"deadline": n},
		sq.Or{sq.Eq{"lease_owner": nil}, sq.Lt{"lease_expires_at": n}},
	}).OrderBy("id")
	if s.d.SkipLocked {
		sel = sel.Suffix("FOR UPDATE SKIP LOCKED")
	}
	q, args, err := sel.ToSql()
	if err != nil {
		return nil, err
	}
	tx, err := s.w.BeginTxx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer rollback(tx)
	rows, err := tx.QueryxContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	overdue, err := s.scanOperations(rows)
	if err != nil {
		return nil, err
	}
	failed := []storage.Operation{}
	var events []storage.Event
	for _, op := range overdue {
		step, sp := op.Progress.CurrentStep()
		lastErr := sp.LastError
		if lastErr == "" {
			lastErr = op.LastError
		}
		msg := storage.LimitVerdict(step, message, lastErr)
		q, args, err := s.sb().Update("operations").
			Set("state", string(storage.StateFailed)).
			Set("description", msg).
			Set("last_error", msg).
			Set("due_at", nil).
			Set("lease_owner", nil).
			Set("lease_expires_at", nil).
			Set("updated_at", n).
			Set("version", sq.Expr("version + 1")).
			Where(sq.Eq{"id": op.ID, "version": op.Version}).
			Suffix("RETURNING " + opCols).ToSql()
		if err != nil {
			return nil, err
		}
		out, err := s.scanOperation(tx.QueryRowxContext(ctx, q, args...))
		if err != nil {
			return nil, err
		}
		failed = append(failed, out)
		events = append(events, storage.Event{OperationID: op.ID, InstanceID: op.InstanceID, Step: step, Stage: op.Stage, Type: storage.EventFailed,
			Message: msg, CreatedAt: micro(now)})
	}
	if len(failed) == 0 {
		return failed, nil
	}
	if err := s.insertEvents(ctx, tx, events); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return failed, nil
}

func (s *Store) CountOperations(ctx context.Context) ([]storage.OperationCount, error) {
	rows, err := s.r.QueryxContext(ctx, "SELECT type, state, COUNT(*) FROM operations GROUP BY type, state ORDER BY type, state")
	if err != nil {
		return nil, fmt.Errorf("counting operations: %w", err)
	}
	defer rows.Close()
	out := []storage.OperationCount{}
	for rows.Next() {
		var c storage.OperationCount
		var state string
		if err := rows.Scan(&c.Type, &state, &c.Count); err != nil {
			return nil, fmt.Errorf("counting operations: %w", err)
		}
		c.State = storage.OperationState(state)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("counting operations: %w", err)
	}
	return out, nil
}

// OldestDue is the due time of the operation that has waited longest among those that could be
// claimed at now (active, due, not leased); ok is false when there is none. now - OldestDue is
// the engine's due lag (keb_due_lag_seconds).
func (s *Store) OldestDue(ctx context.Context, now time.Time) (due time.Time, ok bool, err error) {
	q, args, err := s.sb().Select("MIN(due_at)").From("operations").Where(s.claimable(now)).ToSql()
	if err != nil {
		return time.Time{}, false, err
	}
	var t dbTime
	if err := s.r.GetContext(ctx, &t, q, args...); err != nil {
		return time.Time{}, false, fmt.Errorf("reading the oldest due operation: %w", err)
	}
	return t.Time, t.Valid, nil
}

func (s *Store) QueueDepth(ctx context.Context, now time.Time) (int, error) {
	n, err := s.count(ctx, "operations", s.claimable(now))
	if err != nil {
		return 0, fmt.Errorf("measuring queue depth: %w", err)
	}
	return n, nil
}
