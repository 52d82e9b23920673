package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/jmoiron/sqlx"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

var _ storage.Orchestrations = (*Store)(nil)

func (s *Store) Orchestrations() storage.Orchestrations { return s }

const orchCols = "id, type, state, description, parameters, created_at, updated_at"

// orchOpView is an orchestration's operations with the state operators see: a started row shows
// its engine operation's state (pending there is in progress here: it was started) and its
// description (a failure's last error, which names the system and its answer).
const orchOpView = `(SELECT oo.orchestration_id, oo.instance_id, oo.runtime_id, oo.global_account_id, oo.sub_account_id,
	oo.region, oo.plan_id, oo.seq, oo.operation_id, oo.state AS stored_state,
	CASE WHEN oo.state = 'started' THEN CASE WHEN o.state IN ('succeeded', 'failed') THEN o.state ELSE 'in progress' END ELSE oo.state END AS state,
	CASE WHEN oo.state <> 'started' THEN oo.description WHEN o.state = 'failed' AND o.last_error <> '' THEN o.last_error ELSE COALESCE(o.description, '') END AS description,
	oo.attempts, oo.due_at, oo.started_at, oo.created_at, oo.updated_at
	FROM orchestration_operations oo LEFT JOIN operations o ON o.id = oo.operation_id) v`

const orchOpCols = "orchestration_id, instance_id, runtime_id, global_account_id, sub_account_id, region, plan_id, operation_id, stored_state, state, description, attempts, due_at, started_at, created_at, updated_at"

// notStarted are the stored states of rows the scheduler may still start.
var notStarted = []string{storage.OrchOpPending, storage.OrchOpRetrying}

func scanOrchestration(r rowScanner) (storage.Orchestration, error) {
	var (
		o                storage.Orchestration
		params           string
		created, updated dbTime
	)
	if err := r.Scan(&o.ID, &o.Type, &o.State, &o.Description, &params, &created, &updated); err != nil {
		return storage.Orchestration{}, err
	}
	o.Parameters, o.CreatedAt, o.UpdatedAt = []byte(params), created.value(), updated.value()
	return o, nil
}

func scanOrchOp(r rowScanner) (storage.OrchestrationOperation, error) {
	var (
		op                           storage.OrchestrationOperation
		due, started, created, updat dbTime
	)
	if err := r.Scan(&op.OrchestrationID, &op.InstanceID, &op.RuntimeID, &op.GlobalAccountID, &op.SubAccountID, &op.Region, &op.PlanID,
		&op.OperationID, &op.StoredState, &op.State, &op.Description, &op.Attempts, &due, &started, &created, &updat); err != nil {
		return storage.OrchestrationOperation{}, err
	}
	op.DueAt, op.StartedAt, op.CreatedAt, op.UpdatedAt = due.value(), started.ptr(), created.value(), updat.value()
	return op, nil
}

func (s *Store) InsertOrchestration(ctx context.Context, o storage.Orchestration, ops []storage.OrchestrationOperation) (storage.Orchestration, error) {
	out, err := s.insertOrchestration(ctx, o, ops)
	if err != nil {
		return storage.Orchestration{}, fmt.Errorf("inserting orchestration %s with %d operations: %w", o.ID, len(ops), err)
	}
	return out, nil
}

func (s *Store) insertOrchestration(ctx context.Context, o storage.Orchestration, ops []storage.OrchestrationOperation) (storage.Orchestration, error) {
	if o.ID == "" || o.Type == "" || o.State == "" {
		return storage.Orchestration{}, errors.New("ID, type and state are required")
	}
	now := micro(time.Now())
	if o.CreatedAt.IsZero() {
		o.CreatedAt = now
	}
	o.CreatedAt, o.UpdatedAt = micro(o.CreatedAt), now
	tx, err := s.w.BeginTxx(ctx, nil)
	if err != nil {
		return storage.Orchestration{}, err
	}
	defer rollback(tx)
	_, err = tx.ExecContext(ctx, s.d.rebind("INSERT INTO orchestrations ("+orchCols+") VALUES (?, ?, ?, ?, ?, ?, ?)"),
		o.ID, o.Type, o.State, o.Description, string(o.Parameters), s.d.timeArg(o.CreatedAt), s.d.timeArg(o.UpdatedAt))
	if err != nil {
		if s.d.IsUniqueViolation(err) {
			return storage.Orchestration{}, storage.ErrAlreadyExists
		}
		return storage.Orchestration{}, err
	}
	// Batches keep each statement well below the databases' bind parameter limits.
	const batch = 500
	for start := 0; start < len(ops); start += batch {
		ins := s.sb().Insert("orchestration_operations").Columns("orchestration_id", "instance_id", "runtime_id", "global_account_id",
			"sub_account_id", "region", "plan_id", "seq", "operation_id", "state", "description", "attempts", "due_at", "created_at", "updated_at")
		for i, op := range ops[start:min(start+batch, len(ops))] {
			if op.OperationID == "" || op.InstanceID == "" {
				return storage.Orchestration{}, fmt.Errorf("operation %d: instance and operation IDs are required", start+i)
			}
			ins = ins.Values(o.ID, op.InstanceID, op.RuntimeID, op.GlobalAccountID, op.SubAccountID, op.Region, op.PlanID, start+i,
				op.OperationID, op.StoredState, op.Description, 0, s.d.timeArg(op.DueAt), s.d.timeArg(now), s.d.timeArg(now))
		}
		q, args, err := ins.ToSql()
		if err != nil {
			return storage.Orchestration{}, err
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return storage.Orchestration{}, err
		}
	}
	return o, tx.Commit()
}

func (s *Store) GetOrchestration(ctx context.Context, id string) (storage.Orchestration, error) {
	o, err := scanOrchestration(s.r.QueryRowxContext(ctx, s.d.rebind("SELECT "+orchCols+" FROM orchestrations WHERE id = ?"), id))
	if errors.Is(err, sql.ErrNoRows) {
		err = storage.ErrNotFound
	}
	if err != nil {
		return storage.Orchestration{}, fmt.Errorf("getting orchestration %s: %w", id, err)
	}
	return o, nil
}

func (s *Store) ListOrchestrations(ctx context.Context, f storage.OrchestrationFilter) (storage.Page[storage.Orchestration], error) {
	if err := checkLists("listing orchestrations", len(f.States)); err != nil {
		return storage.Page[storage.Orchestration]{}, err
	}
	page, err := listPage(ctx, s, pageQuery{table: "orchestrations", cols: orchCols, where: eqIfAny(sq.And{}, "state", f.States),
		order: []string{"created_at DESC", "id"}, paging: f.Paging}, scanOrchestration)
	if err != nil {
		return storage.Page[storage.Orchestration]{}, fmt.Errorf("listing orchestrations: %w", err)
	}
	return page, nil
}

func (s *Store) SetOrchestrationState(ctx context.Context, id string, from []string, state, description string) error {
	err := s.updateOne(ctx, s.sb().Update("orchestrations").Set("state", state).Set("description", description).
		Set("updated_at", s.d.timeArg(time.Now())).Where(sq.Eq{"id": id, "state": from}),
		func() error { return s.missingOrConflict(ctx, "orchestrations", "id", id) })
	if err != nil {
		return fmt.Errorf("moving orchestration %s from %s to %s: %w", id, strings.Join(from, "/"), state, err)
	}
	return nil
}

func (s *Store) CountOrchestrationOperations(ctx context.Context, id string) (map[string]int, error) {
	rows, err := s.r.QueryxContext(ctx, s.d.rebind("SELECT state, COUNT(*) FROM "+orchOpView+" WHERE orchestration_id = ? GROUP BY state"), id)
	if err != nil {
		return nil, fmt.Errorf("counting operations of orchestration %s: %w", id, err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return nil, fmt.Errorf("counting operations of orchestration %s: %w", id, err)
		}
		out[state] = n
	}
	return out, rows.Err()
}

func (s *Store) ListOrchestrationOperations(ctx context.Context, id string, f storage.OrchestrationOperationFilter) (storage.Page[storage.OrchestrationOperation], error) {
	if err := checkLists("listing orchestration operations", len(f.States)); err != nil {
		return storage.Page[storage.OrchestrationOperation]{}, err
	}
	where := eqIfAny(sq.And{sq.Eq{"orchestration_id": id}}, "state", f.States)
	page, err := listPage(ctx, s, pageQuery{table: orchOpView, cols: orchOpCols, where: where, order: []string{"seq"}, paging: f.Paging}, scanOrchOp)
	if err != nil {
		return storage.Page[storage.OrchestrationOperation]{}, fmt.Errorf("listing operations of orchestration %s: %w", id, err)
	}
	return page, nil
}

func (s *Store) GetOrchestrationOperation(ctx context.Context, id, operationID string) (storage.OrchestrationOperation, error) {
	op, err := scanOrchOp(s.r.QueryRowxContext(ctx, s.d.rebind("SELECT "+orchOpCols+" FROM "+orchOpView+" WHERE orchestration_id = ? AND operation_id = ?"), id, operationID))
	if errors.Is(err, sql.ErrNoRows) {
		err = storage.ErrNotFound
	}
	if err != nil {
		return storage.OrchestrationOperation{}, fmt.Errorf("getting operation %s of orchestration %s: %w", operationID, id, err)
	}
	return op, nil
}

func (s *Store) DueOrchestrationOperations(ctx context.Context, id string, now time.Time, limit int) ([]storage.OrchestrationOperation, error) {
	q, args, err := s.sb().Select(orchOpCols).From(orchOpView).
		Where(sq.And{sq.Eq{"orchestration_id": id, "stored_state": notStarted}, sq.LtOrEq{"due_at": s.d.timeArg(now)}}).
		OrderBy("due_at", "seq").Limit(uint64(max(limit, 1))).ToSql()
	if err != nil {
		return nil, err
	}
	rows, err := s.r.QueryxContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("listing due operations of orchestration %s: %w", id, err)
	}
	defer rows.Close()
	var out []storage.OrchestrationOperation
	for rows.Next() {
		op, err := scanOrchOp(rows)
		if err != nil {
			return nil, fmt.Errorf("listing due operations of orchestration %s: %w", id, err)
		}
		out = append(out, op)
	}
	return out, rows.Err()
}

func (s *Store) StartOrchestrationOperation(ctx context.Context, id string, op storage.Operation, workers int, blocking []string) (storage.Operation, error) {
	out, err := s.startOrchestrationOperation(ctx, id, op, workers, blocking)
	if err != nil {
		return storage.Operation{}, fmt.Errorf("starting operation %s of orchestration %s for instance %s: %w", op.ID, id, op.InstanceID, err)
	}
	s.notify(ctx)
	return out, nil
}

func (s *Store) startOrchestrationOperation(ctx context.Context, id string, op storage.Operation, workers int, blocking []string) (storage.Operation, error) {
	// The orchestration's lock makes the worker count below exact even if two schedulers ran.
	tx, err := s.beginLocked(ctx, id)
	if err != nil {
		return storage.Operation{}, err
	}
	defer rollback(tx)
	var stored, opID string
	err = tx.QueryRowxContext(ctx, s.d.rebind("SELECT state, operation_id FROM orchestration_operations WHERE orchestration_id = ? AND instance_id = ?"),
		id, op.InstanceID).Scan(&stored, &opID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return storage.Operation{}, fmt.Errorf("no such operation: %w", storage.ErrNotFound)
	case err != nil:
		return storage.Operation{}, err
	case !slices.Contains(notStarted, stored) || opID != op.ID:
		return storage.Operation{}, fmt.Errorf("the row is %s with operation %s: %w", stored, opID, storage.ErrConflict)
	}
	if skip, err := s.deprovisionedTx(ctx, tx, op.InstanceID); err != nil {
		return storage.Operation{}, err
	} else if skip != nil {
		now := s.d.timeArg(time.Now())
		if _, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE orchestration_operations SET state = ?, description = ?, updated_at = ?
			WHERE orchestration_id = ? AND instance_id = ?`), storage.OrchOpSkipped, "skipped: "+skip.Reason, now, id, op.InstanceID); err != nil {
			return storage.Operation{}, err
		}
		if err := tx.Commit(); err != nil {
			return storage.Operation{}, err
		}
		return storage.Operation{}, skip
	}
	var active int
	if err := tx.QueryRowxContext(ctx, s.d.rebind(`SELECT COUNT(*) FROM orchestration_operations oo JOIN operations o ON o.id = oo.operation_id
		WHERE oo.orchestration_id = ? AND oo.state = 'started' AND o.state IN (?, ?)`), id, activeStates[0], activeStates[1]).Scan(&active); err != nil {
		return storage.Operation{}, err
	}
	if active >= workers {
		return storage.Operation{}, storage.ErrWorkersBusy
	}
	out, err := s.insertOperationExclusiveTx(ctx, tx, op, blocking)
	if err != nil {
		return storage.Operation{}, err
	}
	now := s.d.timeArg(time.Now())
	if _, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE orchestration_operations SET state = 'started', attempts = attempts + 1,
		started_at = ?, updated_at = ?, description = '' WHERE orchestration_id = ? AND instance_id = ?`), now, now, id, op.InstanceID); err != nil {
		return storage.Operation{}, err
	}
	if _, err := tx.ExecContext(ctx, s.d.rebind("UPDATE orchestrations SET state = 'in progress', updated_at = ? WHERE id = ? AND state = 'pending'"), now, id); err != nil {
		return storage.Operation{}, err
	}
	return out, tx.Commit()
}

// deprovisionedTx locks the instance's row (as accepting a deprovisioning does, so neither can
// pass the other) and says why the instance is not to be upgraded: it is gone, archived, or has a
// deprovisioning pending, running or succeeded. nil: upgrade it. A failed deprovisioning leaves a
// live instance, which is upgraded.
func (s *Store) deprovisionedTx(ctx context.Context, tx *sqlx.Tx, instanceID string) (*storage.SkippedError, error) {
	lock := "SELECT deleted_at FROM instances WHERE instance_id = ?"
	if s.d.SkipLocked {
		lock += " FOR UPDATE"
	}
	var deleted dbTime
	err := tx.QueryRowxContext(ctx, s.d.rebind(lock), instanceID).Scan(&deleted)
	missing := errors.Is(err, sql.ErrNoRows)
	if err != nil && !missing {
		return nil, fmt.Errorf("locking instance %s: %w", instanceID, err)
	}
	var depID, depState string
	err = tx.QueryRowxContext(ctx, s.d.rebind(`SELECT id, state FROM operations WHERE instance_id = ? AND type = ? AND state IN (?, ?, ?)
		ORDER BY created_at DESC LIMIT 1`), instanceID, storage.TypeDeprovision, activeStates[0], activeStates[1], string(storage.StateSucceeded)).Scan(&depID, &depState)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("reading the deprovisioning of instance %s: %w", instanceID, err)
	}
	switch {
	case missing:
		return &storage.SkippedError{DeprovisioningID: depID, Reason: withOp("the instance no longer exists", depID)}, nil
	case deleted.ptr() != nil:
		return &storage.SkippedError{DeprovisioningID: depID, Reason: withOp("the instance was deprovisioned", depID)}, nil
	case depID != "" && depState == string(storage.StateSucceeded):
		return &storage.SkippedError{DeprovisioningID: depID, Reason: withOp("the instance was deprovisioned", depID)}, nil
	case depID != "":
		return &storage.SkippedError{DeprovisioningID: depID, Reason: withOp("the instance's deprovisioning was accepted before its upgrade started", depID)}, nil
	}
	return nil, nil
}

func withOp(reason, depID string) string {
	if depID == "" {
		return reason
	}
	return reason + " (deprovisioning operation " + depID + ")"
}

func (s *Store) DeferOrchestrationOperation(ctx context.Context, id, instanceID, operationID string, dueAt time.Time, description string, failed bool) error {
	upd := s.sb().Update("orchestration_operations").Set("due_at", s.d.timeArg(dueAt)).Set("description", description).
		Set("updated_at", s.d.timeArg(time.Now()))
	if failed {
		upd = upd.Set("state", storage.OrchOpFailed)
	}
	err := s.updateOne(ctx, upd.Where(sq.Eq{"orchestration_id": id, "instance_id": instanceID, "operation_id": operationID, "state": notStarted}),
		func() error { return storage.ErrConflict })
	if err != nil {
		return fmt.Errorf("deferring operation %s of orchestration %s: %w", operationID, id, err)
	}
	return nil
}

func (s *Store) CancelOrchestration(ctx context.Context, id string) (storage.CancelResult, error) {
	res, err := s.cancelOrchestration(ctx, id)
	if err != nil {
		return storage.CancelResult{}, fmt.Errorf("canceling orchestration %s: %w", id, err)
	}
	return res, nil
}

func (s *Store) cancelOrchestration(ctx context.Context, id string) (storage.CancelResult, error) {
	tx, err := s.beginLocked(ctx, id)
	if err != nil {
		return storage.CancelResult{}, err
	}
	defer rollback(tx)
	state, err := s.orchestrationState(ctx, tx, id)
	if err != nil {
		return storage.CancelResult{}, err
	}
	switch state {
	case "canceling", "canceled":
		return storage.CancelResult{State: state}, nil
	case "pending", "in progress", "retrying":
	default:
		return storage.CancelResult{State: state}, fmt.Errorf("it has already %s (%w)", state, storage.ErrOrchestrationState)
	}
	now := s.d.timeArg(time.Now())
	q, args, err := s.sb().Update("orchestration_operations").Set("state", storage.OrchOpCanceled).
		Set("description", "canceled by the operator before it started").Set("updated_at", now).
		Where(sq.Eq{"orchestration_id": id, "state": notStarted}).ToSql()
	if err != nil {
		return storage.CancelResult{}, err
	}
	r, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return storage.CancelResult{}, err
	}
	canceled, err := r.RowsAffected()
	if err != nil {
		return storage.CancelResult{}, err
	}
	running, err := s.runningOf(ctx, tx, id)
	if err != nil {
		return storage.CancelResult{}, err
	}
	next, desc := "canceling", fmt.Sprintf("canceled %d operations not started; waiting for %d running ones to finish", canceled, running)
	if running == 0 {
		next, desc = "canceled", fmt.Sprintf("canceled %d operations not started", canceled)
	}
	if _, err := tx.ExecContext(ctx, s.d.rebind("UPDATE orchestrations SET state = ?, description = ?, updated_at = ? WHERE id = ?"), next, desc, now, id); err != nil {
		return storage.CancelResult{}, err
	}
	return storage.CancelResult{State: next, Canceled: int(canceled)}, tx.Commit()
}

// updateOne runs upd; when it changed no row, the error is none's.
func (s *Store) updateOne(ctx context.Context, upd sq.UpdateBuilder, none func() error) error {
	q, args, err := upd.ToSql()
	if err != nil {
		return err
	}
	res, err := s.writes.exec(ctx, q, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return none()
	}
	return nil
}

// beginLocked starts a write transaction holding the orchestration's lock (PostgreSQL: an
// advisory lock until the transaction ends; SQLite transactions are exclusive already).
func (s *Store) beginLocked(ctx context.Context, id string) (*sqlx.Tx, error) {
	tx, err := s.w.BeginTxx(ctx, nil)
	if err != nil {
		return nil, err
	}
	if s.d.XactLockSQL != "" {
		if _, err := tx.ExecContext(ctx, s.d.rebind(s.d.XactLockSQL), "orchestration:"+id); err != nil {
			rollback(tx)
			return nil, fmt.Errorf("locking the orchestration: %w", err)
		}
	}
	return tx, nil
}

// orchestrationState reads the orchestration's state in tx (ErrNotFound when there is none).
func (s *Store) orchestrationState(ctx context.Context, tx *sqlx.Tx, id string) (string, error) {
	var state string
	err := tx.QueryRowxContext(ctx, s.d.rebind("SELECT state FROM orchestrations WHERE id = ?"), id).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return "", storage.ErrNotFound
	}
	return state, err
}

// runningOf counts the orchestration's started operations that have not finished.
func (s *Store) runningOf(ctx context.Context, q sqlx.QueryerContext, id string) (int, error) {
	var n int
	err := q.QueryRowxContext(ctx, s.d.rebind("SELECT COUNT(*) FROM "+orchOpView+" WHERE orchestration_id = ? AND state = 'in progress'"), id).Scan(&n)
	return n, err
}

func (s *Store) RetryOrchestration(ctx context.Context, id string, operationIDs []string, newID func() string, now time.Time) ([]string, error) {
	out, err := s.retryOrchestration(ctx, id, operationIDs, newID, now)
	if err != nil {
		return nil, fmt.Errorf("retrying orchestration %s: %w", id, err)
	}
	return out, nil
}

// retryChunk bounds the operation IDs looked up in one statement (a variable each).
const retryChunk = 1000

// failedOrchOps are the orchestration's failed operations in order, those of operationIDs only
// when given (looked up in chunks, so that any number of IDs stays within the drivers' limits).
func (s *Store) failedOrchOps(ctx context.Context, tx *sqlx.Tx, id string, operationIDs []string) ([]retryRow, error) {
	where := sq.And{sq.Eq{"orchestration_id": id, "state": storage.OrchOpFailed}}
	if len(operationIDs) == 0 {
		return s.selectRetryRows(ctx, tx, where)
	}
	var out []retryRow
	for chunk := range slices.Chunk(operationIDs, retryChunk) {
		rows, err := s.selectRetryRows(ctx, tx, append(slices.Clone(where), sq.Eq{"operation_id": chunk}))
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	slices.SortFunc(out, func(a, b retryRow) int { return cmp.Compare(a.Seq, b.Seq) })
	// The same ID given twice is found twice.
	return slices.CompactFunc(out, func(a, b retryRow) bool { return a.Seq == b.Seq }), nil
}

func (s *Store) selectRetryRows(ctx context.Context, tx *sqlx.Tx, where sq.And) ([]retryRow, error) {
	q, args, err := s.sb().Select("instance_id", "operation_id", "seq").From(orchOpView).Where(where).OrderBy("seq").ToSql()
	if err != nil {
		return nil, err
	}
	var out []retryRow
	if err := sqlx.SelectContext(ctx, tx, &out, q, args...); err != nil {
		return nil, err
	}
	return out, nil
}

type retryRow struct {
	Seq         int64  `db:"seq"`
	InstanceID  string `db:"instance_id"`
	OperationID string `db:"operation_id"`
}

func (s *Store) retryOrchestration(ctx context.Context, id string, operationIDs []string, newID func() string, now time.Time) ([]string, error) {
	tx, err := s.beginLocked(ctx, id)
	if err != nil {
		return nil, err
	}
	defer rollback(tx)
	state, err := s.orchestrationState(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	if !slices.Contains([]string{"in progress", "failed", "retrying"}, state) {
		return nil, fmt.Errorf("a %s orchestration has no failed operations to retry (%w)", state, storage.ErrOrchestrationState)
	}
	failed, err := s.failedOrchOps(ctx, tx, id, operationIDs)
	if err != nil {
		return nil, err
	}
	if len(operationIDs) > 0 {
		found := make(map[string]bool, len(failed))
		for _, f := range failed {
			found[f.OperationID] = true
		}
		var invalid []string
		for _, want := range operationIDs {
			if !found[want] {
				invalid = append(invalid, want)
			}
		}
		if len(invalid) > 0 {
			return nil, &storage.InvalidRetryError{OperationIDs: invalid,
				Reason: fmt.Sprintf("operationIDs: not failed operations of orchestration %s: %s", id, strings.Join(invalid, ", "))}
		}
	}
	if len(failed) == 0 {
		return nil, &storage.InvalidRetryError{Reason: fmt.Sprintf("orchestration %s has no failed operations", id)}
	}
	ts := s.d.timeArg(now)
	var out []string
	for _, f := range failed {
		next := newID()
		if _, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE orchestration_operations SET state = ?, operation_id = ?, due_at = ?, updated_at = ?,
			description = ? WHERE orchestration_id = ? AND instance_id = ? AND operation_id = ?`), storage.OrchOpRetrying, next, ts, ts,
			"retry of failed operation "+f.OperationID, id, f.InstanceID, f.OperationID); err != nil {
			return nil, err
		}
		out = append(out, next)
	}
	if _, err := tx.ExecContext(ctx, s.d.rebind("UPDATE orchestrations SET state = ?, description = ?, updated_at = ? WHERE id = ?"),
		"retrying", fmt.Sprintf("retrying %d failed operations", len(out)), ts, id); err != nil {
		return nil, err
	}
	return out, tx.Commit()
}
