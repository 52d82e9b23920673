package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/jmoiron/sqlx"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

const instanceCols = "instance_id, runtime_id, global_account_id, sub_account_id, service_id, plan_id, provider_region, dashboard_url, parameters, secrets, created_at, updated_at, version, deleted_at, expired_at"

func (s *Store) scanInstance(r rowScanner) (storage.Instance, error) { return s.scanInstanceWith(r) }

// scanInstanceWith scans the instance columns followed by extra destinations.
func (s *Store) scanInstanceWith(r rowScanner, extra ...any) (storage.Instance, error) {
	var (
		inst             storage.Instance
		params           sql.NullString
		secrets          []byte
		created, updated dbTime
		deleted, expired dbTime
	)
	dest := append([]any{&inst.InstanceID, &inst.RuntimeID, &inst.GlobalAccountID, &inst.SubAccountID, &inst.ServiceID,
		&inst.PlanID, &inst.ProviderRegion, &inst.DashboardURL, &params, &secrets, &created, &updated, &inst.Version, &deleted, &expired}, extra...)
	if err := r.Scan(dest...); err != nil {
		return storage.Instance{}, err
	}
	inst.DeletedAt, inst.ExpiredAt = deleted.ptr(), expired.ptr()
	if params.Valid && params.String != "" {
		inst.Parameters = []byte(params.String)
	}
	inst.CreatedAt, inst.UpdatedAt = created.value(), updated.value()
	sec, err := s.decryptSecrets(secrets)
	if err != nil {
		return storage.Instance{}, fmt.Errorf("instance %s: %w", inst.InstanceID, err)
	}
	inst.Secrets = sec
	return inst, nil
}

func (s *Store) InsertInstance(ctx context.Context, inst storage.Instance) (storage.Instance, error) {
	out, err := s.insertInstance(ctx, inst)
	if err != nil {
		return storage.Instance{}, fmt.Errorf("inserting instance %s: %w", inst.InstanceID, err)
	}
	return out, nil
}

func (s *Store) InsertInstanceWithOperation(ctx context.Context, inst storage.Instance, op storage.Operation) (storage.Instance, storage.Operation, error) {
	outInst, outOp, err := s.insertInstanceWithOperation(ctx, inst, op, nil)
	if err != nil {
		return storage.Instance{}, storage.Operation{}, fmt.Errorf("inserting instance %s with operation %s: %w", inst.InstanceID, op.ID, err)
	}
	return outInst, outOp, nil
}

func (s *Store) InsertUniqueInstanceWithOperation(ctx context.Context, inst storage.Instance, op storage.Operation) (storage.Instance, storage.Operation, error) {
	outInst, outOp, err := s.insertInstanceWithOperation(ctx, inst, op, func(tx *sqlx.Tx) error {
		if s.d.XactLockSQL != "" { // SQLite transactions are exclusive already
			if _, err := tx.ExecContext(ctx, s.d.rebind(s.d.XactLockSQL), "instance-quota:"+inst.GlobalAccountID+"/"+inst.PlanID); err != nil {
				return err
			}
		}
		var existing string
		err := tx.QueryRowxContext(ctx, s.d.rebind(`SELECT instance_id FROM instances
			WHERE global_account_id = ? AND plan_id = ? AND deleted_at IS NULL LIMIT 1`), inst.GlobalAccountID, inst.PlanID).Scan(&existing)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case err != nil:
			return err
		case existing == inst.InstanceID:
			// The account's instance is this one: a repeat, not a second instance.
			return storage.ErrAlreadyExists
		}
		return &storage.QuotaError{InstanceID: existing}
	})
	if err != nil {
		return storage.Instance{}, storage.Operation{}, fmt.Errorf("inserting instance %s with operation %s: %w", inst.InstanceID, op.ID, err)
	}
	return outInst, outOp, nil
}

// insertInstanceWithOperation inserts both at once; with check, in one transaction after check
// passed in it.
func (s *Store) insertInstanceWithOperation(ctx context.Context, inst storage.Instance, op storage.Operation, check func(*sqlx.Tx) error) (storage.Instance, storage.Operation, error) {
	if op.InstanceID != inst.InstanceID {
		return storage.Instance{}, storage.Operation{}, fmt.Errorf("operation is for %q, not for the instance", op.InstanceID)
	}
	q, args, err := s.instanceInsert(inst, &op)
	if err != nil {
		return storage.Instance{}, storage.Operation{}, err
	}
	return insertWithFirstOperation(ctx, s, q, args, op, s.scanInstance, check)
}

// instanceInsert is the INSERT of inst returning its columns (instanceCols), with ?
// placeholders. With first (the instance's first operation, inserted with it) the row holds its
// type and state from the start: the trigger that keeps an instance's newest operation then
// finds it up to date and writes no second version of the row.
func (s *Store) instanceInsert(inst storage.Instance, first *storage.Operation) (string, []any, error) {
	if inst.InstanceID == "" {
		return "", nil, errors.New("instance ID is empty")
	}
	sec, err := s.encryptSecrets(inst.Secrets)
	if err != nil {
		return "", nil, err
	}
	now := micro(time.Now())
	created := now
	if !inst.CreatedAt.IsZero() {
		created = inst.CreatedAt
	}
	cols := []string{"instance_id", "runtime_id", "global_account_id", "sub_account_id", "service_id", "plan_id",
		"provider_region", "dashboard_url", "parameters", "secrets", "created_at", "updated_at", "version", "deleted_at"}
	vals := []any{inst.InstanceID, inst.RuntimeID, inst.GlobalAccountID, inst.SubAccountID, inst.ServiceID, inst.PlanID,
		inst.ProviderRegion, inst.DashboardURL, nullJSON(inst.Parameters), sec, s.d.timeArg(created), s.d.timeArg(now), 1,
		s.d.nullTimeArg(inst.DeletedAt)}
	if first != nil {
		cols, vals = append(cols, "last_op_type", "last_op_state"), append(vals, first.Type, string(instanceLastOpState(first.State)))
	}
	return sq.Insert("instances").Columns(cols...).Values(vals...).Suffix("RETURNING " + instanceCols).ToSql()
}

func (s *Store) insertInstance(ctx context.Context, inst storage.Instance) (storage.Instance, error) {
	query, args, err := s.instanceInsert(inst, nil)
	if err != nil {
		return storage.Instance{}, err
	}
	out, err := s.scanInstance(s.w.QueryRowxContext(ctx, s.d.rebind(query), args...))
	if s.d.IsUniqueViolation(err) {
		return storage.Instance{}, storage.ErrAlreadyExists
	}
	return out, err
}

func (s *Store) GetInstance(ctx context.Context, id string) (storage.Instance, error) {
	// Prepared once: the broker's PUT and steps read the instance on every provisioning.
	return getByID(ctx, s, "instance", "get_instance", "SELECT "+instanceCols+" FROM instances WHERE instance_id = ?", id, s.scanInstance)
}

// getByID reads the row with id through a statement prepared once (key) and scan; a missing row
// is storage.ErrNotFound.
func getByID[T any](ctx context.Context, s *Store, what, key, query, id string, scan func(rowScanner) (T, error)) (T, error) {
	var zero T
	st, err := s.preparedRead(ctx, key, func() string { return query })
	if err != nil {
		return zero, fmt.Errorf("getting %s %s: %w", what, id, err)
	}
	out, err := scan(st.QueryRowxContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		err = storage.ErrNotFound
	}
	if err != nil {
		return zero, fmt.Errorf("getting %s %s: %w", what, id, err)
	}
	return out, nil
}

func (s *Store) UpdateInstance(ctx context.Context, inst storage.Instance) (storage.Instance, error) {
	out, err := s.updateInstance(ctx, inst)
	if err != nil {
		return storage.Instance{}, fmt.Errorf("updating instance %s (version %d): %w", inst.InstanceID, inst.Version, err)
	}
	return out, nil
}

func (s *Store) updateInstance(ctx context.Context, inst storage.Instance) (storage.Instance, error) {
	sec, err := s.encryptSecrets(inst.Secrets)
	if err != nil {
		return storage.Instance{}, err
	}
	q, args, err := s.sb().Update("instances").
		Set("runtime_id", inst.RuntimeID).
		Set("global_account_id", inst.GlobalAccountID).
		Set("sub_account_id", inst.SubAccountID).
		Set("service_id", inst.ServiceID).
		Set("plan_id", inst.PlanID).
		Set("provider_region", inst.ProviderRegion).
		Set("dashboard_url", inst.DashboardURL).
		Set("parameters", nullJSON(inst.Parameters)).
		Set("secrets", sec).
		Set("deleted_at", s.d.nullTimeArg(inst.DeletedAt)).
		Set("updated_at", s.d.timeArg(time.Now())).
		Set("version", sq.Expr("version + 1")).
		Where(sq.Eq{"instance_id": inst.InstanceID, "version": inst.Version}).
		Suffix("RETURNING " + instanceCols).ToSql()
	if err != nil {
		return storage.Instance{}, err
	}
	out, err := s.scanInstance(s.writes.queryRowx(ctx, q, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return storage.Instance{}, s.missingOrConflict(ctx, "instances", "instance_id", inst.InstanceID)
	}
	return out, err
}

func (s *Store) DeleteInstance(ctx context.Context, id string) error {
	res, err := s.w.ExecContext(ctx, s.d.rebind("DELETE FROM instances WHERE instance_id = ?"), id)
	if err != nil {
		return fmt.Errorf("deleting instance %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("deleting instance %s: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("deleting instance %s: %w", id, storage.ErrNotFound)
	}
	return nil
}

func (s *Store) ListInstances(ctx context.Context, f storage.InstanceFilter) (storage.Page[storage.Instance], error) {
	if err := checkLists("listing instances", instanceFilterLens(f)...); err != nil {
		return storage.Page[storage.Instance]{}, err
	}
	page, err := s.listInstances(ctx, f)
	if err != nil {
		return storage.Page[storage.Instance]{}, fmt.Errorf("listing instances: %w", err)
	}
	return page, nil
}

// instanceWhere is the filter's condition, archived instances left to the caller.
func instanceWhere(f storage.InstanceFilter) sq.And {
	where := sq.And{}
	where = eqIfAny(where, "instance_id", f.InstanceIDs)
	where = eqIfAny(where, "runtime_id", f.RuntimeIDs)
	where = eqIfAny(where, "global_account_id", f.GlobalAccountIDs)
	where = eqIfAny(where, "sub_account_id", f.SubAccountIDs)
	where = eqIfAny(where, "plan_id", f.PlanIDs)
	return eqIfAny(where, "provider_region", f.Regions)
}

func (s *Store) listInstances(ctx context.Context, f storage.InstanceFilter) (storage.Page[storage.Instance], error) {
	where := instanceWhere(f)
	if !f.IncludeDeleted {
		where = append(where, sq.Eq{"deleted_at": nil})
	}
	return listPage(ctx, s, pageQuery{table: "instances", cols: instanceCols, where: where, order: []string{"created_at", "instance_id"}, paging: f.Paging}, s.scanInstance)
}

func (s *Store) InsertOperationExclusive(ctx context.Context, op storage.Operation, blocking []string) (storage.Operation, error) {
	out, err := s.insertOperationExclusive(ctx, op, blocking)
	if err != nil {
		return storage.Operation{}, fmt.Errorf("inserting %s operation for instance %s: %w", op.Type, op.InstanceID, err)
	}
	s.notify(ctx)
	return out, nil
}

func (s *Store) insertOperationExclusive(ctx context.Context, op storage.Operation, blocking []string) (storage.Operation, error) {
	tx, err := s.w.BeginTxx(ctx, nil)
	if err != nil {
		return storage.Operation{}, err
	}
	defer rollback(tx)
	out, err := s.insertOperationExclusiveTx(ctx, tx, op, blocking)
	if err != nil {
		return storage.Operation{}, err
	}
	return out, tx.Commit()
}

// insertOperationExclusiveTx is insertOperationExclusive inside the caller's transaction.
func (s *Store) insertOperationExclusiveTx(ctx context.Context, tx *sqlx.Tx, op storage.Operation, blocking []string) (storage.Operation, error) {
	// The instance row serialises operation starts of one instance (SQLite transactions are
	// exclusive already).
	lock := "SELECT instance_id FROM instances WHERE instance_id = ?"
	if s.d.SkipLocked {
		lock += " FOR UPDATE"
	}
	var id string
	if err := tx.QueryRowxContext(ctx, s.d.rebind(lock), op.InstanceID).Scan(&id); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return storage.Operation{}, storage.ErrNotFound
		}
		return storage.Operation{}, err
	}
	q, args, err := s.sb().Select(opCols).From("operations").
		Where(sq.Eq{"instance_id": op.InstanceID, "state": activeStates, "type": blocking}).
		OrderBy("created_at DESC").Limit(1).ToSql()
	if err != nil {
		return storage.Operation{}, err
	}
	running, err := s.scanOperation(tx.QueryRowxContext(ctx, q, args...))
	switch {
	case err == nil:
		return storage.Operation{}, &storage.InProgressError{Operation: running}
	case !errors.Is(err, sql.ErrNoRows):
		return storage.Operation{}, err
	}
	return s.insertOperation(ctx, tx, op)
}

// instanceLastOpState is the state an instance keeps of its newest operation (as the triggers of
// migration 0097 keep it): pending as in progress, so an operation's first step, which makes it
// in progress, does not rewrite the instance and its ten indexes.
func instanceLastOpState(s storage.OperationState) storage.OperationState {
	if s == storage.StatePending {
		return storage.StateInProgress
	}
	return s
}
