package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/jmoiron/sqlx"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

var _ storage.Lifecycle = (*Store)(nil)

func (s *Store) Lifecycle() storage.Lifecycle { return s }

// runtimeStateSQL derives a runtime's state from its row (see storage.RuntimeStates): the
// archive time, then the newest operation, which triggers keep in last_op_type/last_op_state.
var runtimeStateSQL = strings.NewReplacer(
	"{deprovisioned}", storage.RuntimeDeprovisioned,
	"{provisioning}", storage.RuntimeProvisioning,
	"{deprovisioning}", storage.RuntimeDeprovisioning,
	"{updating}", storage.RuntimeUpdating,
	"{upgrading}", storage.RuntimeUpgrading,
	"{failed}", storage.RuntimeFailed,
	"{suspended}", storage.RuntimeSuspended,
	"{provisioned}", storage.RuntimeProvisioned,
	"{op.pending}", string(storage.StatePending),
	"{op.inProgress}", string(storage.StateInProgress),
	"{op.failed}", string(storage.StateFailed),
	"{type.deprovision}", string(storage.TypeDeprovision),
	"{type.suspension}", string(storage.TypeSuspension),
	"{type.update}", string(storage.TypeUpdate),
	"{type.upgradeKyma}", string(storage.TypeUpgradeKyma),
	"{type.upgradeCluster}", string(storage.TypeUpgradeCluster),
).Replace(`CASE
	WHEN deleted_at IS NOT NULL THEN '{deprovisioned}'
	WHEN last_op_type = '' THEN '{provisioning}'
	WHEN last_op_state IN ('{op.pending}', '{op.inProgress}') THEN CASE last_op_type
		WHEN '{type.deprovision}' THEN '{deprovisioning}' WHEN '{type.suspension}' THEN '{deprovisioning}'
		WHEN '{type.update}' THEN '{updating}'
		WHEN '{type.upgradeKyma}' THEN '{upgrading}' WHEN '{type.upgradeCluster}' THEN '{upgrading}'
		ELSE '{provisioning}' END
	WHEN last_op_state = '{op.failed}' THEN '{failed}'
	WHEN last_op_type = '{type.suspension}' THEN '{suspended}'
	WHEN last_op_type = '{type.deprovision}' THEN '{deprovisioned}'
	ELSE '{provisioned}' END`)

const runtimeExtraCols = ", last_op_type, last_op_state, "

func (s *Store) scanRuntimeRow(r rowScanner) (storage.RuntimeRow, error) {
	var out storage.RuntimeRow
	var state string
	inst, err := s.scanInstanceWith(r, &out.LastOperationType, &state, &out.State)
	out.Instance, out.LastOperationState = inst, storage.OperationState(state)
	return out, err
}

func (s *Store) FindRuntimes(ctx context.Context, f storage.RuntimeQuery) (storage.Page[storage.RuntimeRow], error) {
	if err := checkLists("finding runtimes", append(instanceFilterLens(f.InstanceFilter), len(f.ShootNames), len(f.States))...); err != nil {
		return storage.Page[storage.RuntimeRow]{}, err
	}
	where := instanceWhere(f.InstanceFilter)
	// The shoot name a provisioning recorded is kept on the instance by triggers (0021).
	where = eqIfAny(where, "shoot_name", f.ShootNames)
	if len(f.States) > 0 {
		where = append(where, sq.Eq{"(" + runtimeStateSQL + ")": f.States})
	}
	if f.Expired != nil {
		if *f.Expired {
			where = append(where, sq.NotEq{"expired_at": nil})
		} else {
			where = append(where, sq.Eq{"expired_at": nil})
		}
	}
	if f.CreatedBefore != nil {
		or := sq.Or{}
		for plan, before := range f.CreatedBefore {
			or = append(or, sq.And{sq.Eq{"plan_id": plan}, sq.Lt{"created_at": s.d.timeArg(before)}})
		}
		if len(or) == 0 {
			or = append(or, sq.Expr("1 = 0"))
		}
		where = append(where, or)
	}
	if !f.IncludeDeleted && !containsString(f.States, storage.RuntimeDeprovisioned) {
		where = append(where, sq.Eq{"deleted_at": nil})
	}
	order, err := runtimeOrder(f.Sort, f.Descending)
	if err != nil {
		return storage.Page[storage.RuntimeRow]{}, fmt.Errorf("listing runtimes: %w", err)
	}
	cols := instanceCols + runtimeExtraCols + runtimeStateSQL
	page, err := listPage(ctx, s, pageQuery{table: "instances", cols: cols, where: where, order: order, paging: f.Paging}, s.scanRuntimeRow)
	if err != nil {
		return storage.Page[storage.RuntimeRow]{}, fmt.Errorf("listing runtimes: %w", err)
	}
	return page, nil
}

// runtimeSortCols are the columns (or expression) of each sort key; 0041 indexes each column
// with instance_id.
var runtimeSortCols = map[string]string{
	storage.SortCreatedAt: "created_at", storage.SortInstanceID: "instance_id", storage.SortRuntimeID: "runtime_id",
	storage.SortGlobalAccountID: "global_account_id", storage.SortSubAccountID: "sub_account_id", storage.SortPlan: "plan_id",
	storage.SortRegion: "provider_region", storage.SortState: "(" + runtimeStateSQL + ")",
}

// runtimeOrder is the ORDER BY of a sort key, instance_id breaking ties in the same direction.
func runtimeOrder(sort string, desc bool) ([]string, error) {
	if sort == "" {
		sort = storage.SortCreatedAt
	}
	col, ok := runtimeSortCols[sort]
	if !ok {
		return nil, fmt.Errorf("unknown sort %q", sort)
	}
	dir := " ASC"
	if desc {
		dir = " DESC"
	}
	if col == "instance_id" {
		return []string{col + dir}, nil
	}
	return []string{col + dir, "instance_id" + dir}, nil
}

func containsString(list []string, v string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}

func (s *Store) CountRuntimes(ctx context.Context) ([]storage.RuntimeCount, error) {
	q := "SELECT plan_id, provider_region, st, COUNT(*) FROM (SELECT plan_id, provider_region, " + runtimeStateSQL +
		" AS st FROM instances WHERE deleted_at IS NULL) x GROUP BY plan_id, provider_region, st ORDER BY plan_id, provider_region, st"
	rows, err := s.r.QueryxContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("counting runtimes: %w", err)
	}
	defer rows.Close()
	out := []storage.RuntimeCount{}
	for rows.Next() {
		var c storage.RuntimeCount
		if err := rows.Scan(&c.PlanID, &c.Region, &c.State, &c.Count); err != nil {
			return nil, fmt.Errorf("counting runtimes: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("counting runtimes: %w", err)
	}
	return out, nil
}

func (s *Store) ExpireWithOperation(ctx context.Context, op storage.Operation, at time.Time, blocking []string) (storage.Operation, error) {
	out, err := s.inTx(ctx, func(tx *sqlx.Tx) (storage.Operation, error) {
		// The update locks the instance row first; the exclusive insert then checks under it.
		res, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE instances SET expired_at = COALESCE(expired_at, ?)
			WHERE instance_id = ? AND deleted_at IS NULL`), s.d.timeArg(at), op.InstanceID)
		if err != nil {
			return storage.Operation{}, err
		}
		if n, err := res.RowsAffected(); err != nil {
			return storage.Operation{}, err
		} else if n == 0 {
			return storage.Operation{}, storage.ErrNotFound // unknown or archived
		}
		if op.ID == "" {
			return op, nil // the runtime is removed already: only the expiry
		}
		return s.insertOperationExclusiveTx(ctx, tx, op, blocking)
	})
	if err != nil {
		return storage.Operation{}, fmt.Errorf("expiring instance %s: %w", op.InstanceID, err)
	}
	if op.ID != "" {
		s.notify(ctx)
	}
	return out, nil
}

func (s *Store) NotCompletedOperations(ctx context.Context, types []string, since time.Time, limit int) ([]storage.Operation, error) {
	q, args, err := s.sb().Select(opCols).From("operations o").Where(sq.And{
		sq.Eq{"o.type": types, "o.state": string(storage.StateSucceeded)},
		sq.GtOrEq{"o.updated_at": s.d.timeArg(since)},
		sq.Like{"o.progress": `%"executed_but_not_completed":[%`},
		sq.Expr("NOT EXISTS (SELECT 1 FROM retriggers r WHERE r.origin_id = o.id)"),
		sq.Expr("NOT EXISTS (SELECT 1 FROM retrigger_operations ro WHERE ro.operation_id = o.id)"),
	}).OrderBy("o.updated_at", "o.id").Limit(uint64(limit)).ToSql()
	if err != nil {
		return nil, fmt.Errorf("listing not completed operations: %w", err)
	}
	rows, err := s.r.QueryxContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("listing not completed operations: %w", err)
	}
	defer rows.Close()
	out, err := s.scanOperations(rows)
	if err != nil {
		return nil, fmt.Errorf("listing not completed operations: %w", err)
	}
	return out, nil
}

// inTx runs f in a transaction, committed when f succeeds.
func (s *Store) inTx(ctx context.Context, f func(*sqlx.Tx) (storage.Operation, error)) (storage.Operation, error) {
	tx, err := s.w.BeginTxx(ctx, nil)
	if err != nil {
		return storage.Operation{}, err
	}
	defer rollback(tx)
	out, err := f(tx)
	if err != nil {
		return storage.Operation{}, err
	}
	return out, tx.Commit()
}

const retriggerCols = "origin_id, instance_id, origin_type, steps, state, attempts, last_operation_id, last_error, next_at, created_at, updated_at"

func (s *Store) scanRetrigger(r rowScanner) (storage.Retrigger, error) {
	var (
		out                   storage.Retrigger
		steps                 string
		next, created, update dbTime
	)
	if err := r.Scan(&out.OriginID, &out.InstanceID, &out.OriginType, &steps, &out.State, &out.Attempts,
		&out.LastOperationID, &out.LastError, &next, &created, &update); err != nil {
		return storage.Retrigger{}, err
	}
	if err := json.Unmarshal([]byte(steps), &out.Steps); err != nil {
		return storage.Retrigger{}, fmt.Errorf("retrigger %s: steps: %w", out.OriginID, err)
	}
	out.NextAt, out.CreatedAt, out.UpdatedAt = next.value(), created.value(), update.value()
	return out, nil
}

func (s *Store) InsertRetrigger(ctx context.Context, r storage.Retrigger) error {
	steps, err := json.Marshal(r.Steps)
	if err != nil {
		return fmt.Errorf("inserting retrigger %s: %w", r.OriginID, err)
	}
	now := time.Now()
	q, args, err := s.sb().Insert("retriggers").Columns(strings.Split(retriggerCols, ", ")...).
		Values(r.OriginID, r.InstanceID, r.OriginType, string(steps), r.State, r.Attempts, r.LastOperationID, r.LastError,
			s.d.timeArg(r.NextAt), s.d.timeArg(now), s.d.timeArg(now)).ToSql()
	if err != nil {
		return fmt.Errorf("inserting retrigger %s: %w", r.OriginID, err)
	}
	if _, err := s.w.ExecContext(ctx, q, args...); err != nil {
		if s.d.IsUniqueViolation(err) {
			err = storage.ErrAlreadyExists
		}
		return fmt.Errorf("inserting retrigger %s: %w", r.OriginID, err)
	}
	return nil
}

func (s *Store) UpdateRetrigger(ctx context.Context, r storage.Retrigger) error {
	if err := s.updateRetrigger(ctx, s.w, r); err != nil {
		return fmt.Errorf("updating retrigger %s: %w", r.OriginID, err)
	}
	return nil
}

func (s *Store) updateRetrigger(ctx context.Context, x sqlx.ExecerContext, r storage.Retrigger) error {
	steps, err := json.Marshal(r.Steps)
	if err != nil {
		return err
	}
	q, args, err := s.sb().Update("retriggers").
		Set("steps", string(steps)).Set("state", r.State).Set("attempts", r.Attempts).
		Set("last_operation_id", r.LastOperationID).Set("last_error", r.LastError).
		Set("next_at", s.d.timeArg(r.NextAt)).Set("updated_at", s.d.timeArg(time.Now())).
		Where(sq.Eq{"origin_id": r.OriginID}).ToSql()
	if err != nil {
		return err
	}
	res, err := x.ExecContext(ctx, q, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return storage.ErrNotFound
	}
	return nil
}

func (s *Store) InsertRetriggerOperation(ctx context.Context, r storage.Retrigger, op storage.Operation, blocking []string) (storage.Operation, error) {
	out, err := s.inTx(ctx, func(tx *sqlx.Tx) (storage.Operation, error) {
		out, err := s.insertOperationExclusiveTx(ctx, tx, op, blocking)
		if err != nil {
			return storage.Operation{}, err
		}
		if _, err := tx.ExecContext(ctx, s.d.rebind("INSERT INTO retrigger_operations (operation_id, origin_id) VALUES (?, ?)"), op.ID, r.OriginID); err != nil {
			return storage.Operation{}, err
		}
		r.LastOperationID = op.ID
		return out, s.updateRetrigger(ctx, tx, r)
	})
	if err != nil {
		return storage.Operation{}, fmt.Errorf("inserting re-trigger operation for %s: %w", r.OriginID, err)
	}
	s.notify(ctx)
	return out, nil
}

func (s *Store) ListRetriggers(ctx context.Context, states []string, dueBefore *time.Time, p storage.Paging) (storage.Page[storage.Retrigger], error) {
	if err := checkLists("listing re-triggers", len(states)); err != nil {
		return storage.Page[storage.Retrigger]{}, err
	}
	where := eqIfAny(sq.And{}, "state", states)
	order := []string{"created_at", "origin_id"}
	if dueBefore != nil {
		where = append(where, sq.LtOrEq{"next_at": s.d.timeArg(*dueBefore)})
		order = []string{"next_at", "origin_id"}
	}
	page, err := listPage(ctx, s, pageQuery{table: "retriggers", cols: retriggerCols, where: where, order: order, paging: p}, s.scanRetrigger)
	if err != nil {
		return storage.Page[storage.Retrigger]{}, fmt.Errorf("listing retriggers: %w", err)
	}
	return page, nil
}
