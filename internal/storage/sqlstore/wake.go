package sqlstore

import (
	"context"
	"errors"
	"fmt"

	sq "github.com/Masterminds/squirrel"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Wake makes the selected waiting operations due now in one statement. Leased operations are
// left alone (their worker decides when they run next), and so are those already due: waking
// never delays anything. The rows are locked in ID order like every multi-row writer's.
func (s *Store) Wake(ctx context.Context, r storage.WakeRequest) ([]string, error) {
	ids, err := s.wakeOperations(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("waking operations: %w", err)
	}
	return ids, nil
}

func (s *Store) wakeOperations(ctx context.Context, r storage.WakeRequest) ([]string, error) {
	var which sq.Or
	if len(r.IDs) > 0 {
		which = append(which, sq.Eq{"id": r.IDs})
	}
	if len(r.InstanceIDs) > 0 {
		which = append(which, sq.Eq{"instance_id": r.InstanceIDs})
	}
	if len(r.RuntimeIDs) > 0 {
		byRuntime := sq.Select("instance_id").From("instances").Where(sq.Eq{"runtime_id": r.RuntimeIDs})
		if s.d.Array != nil {
			// PostgreSQL reads the instances first, once (an init plan), and then their
			// operations through their index. As a semi join, a planner without statistics
			// (a new table: the e2e bench's, or a new installation's first minute) started from
			// the operations, reading every one of them per wake (quadratic).
			which = append(which, sq.Expr("instance_id = ANY(ARRAY(?))", byRuntime))
		} else {
			which = append(which, sq.Expr("instance_id IN (?)", byRuntime))
		}
	}
	if len(which) == 0 {
		return nil, errors.New("no operations selected: set IDs, InstanceIDs or RuntimeIDs")
	}
	if r.Now.IsZero() {
		return nil, errors.New("now is not set")
	}
	now := s.d.timeArg(r.Now)
	where := sq.And{
		// Only filters: the selection (IDs, instances, runtimes) finds the rows through its own
		// indexes, and COALESCE hides the columns' indexes from the planner, whose statistics
		// lag on a busy table. As "due_at > now" it walked the due index through every leased
		// operation (most of a busy table's active ones, due later); as "state IN" it ANDed
		// the state index's every active entry with the instance's, once per provisioning.
		// state is never NULL, and
		// COALESCE keeps a NULL due_at (not waiting) out as before.
		sq.Expr("COALESCE(state, '') IN (?,?)", activeStates[0], activeStates[1]),
		sq.Eq{"lease_owner": nil},
		sq.Expr("COALESCE(due_at, ?) > ?", now, now),
		which,
	}
	where = eqIfAny(where, "type", r.Types)
	// A wake is a hint: its commit need not wait for the WAL flush (Config.UnflushedDB).
	return s.makeDue(ctx, s.unflushedWrites, s.sb().Update("operations").Set("due_at", now), where, true)
}
