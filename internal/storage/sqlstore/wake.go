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
		which = append(which, sq.Expr("instance_id IN (?)", byRuntime))
	}
	if len(which) == 0 {
		return nil, errors.New("no operations selected: set IDs, InstanceIDs or RuntimeIDs")
	}
	if r.Now.IsZero() {
		return nil, errors.New("now is not set")
	}
	now := s.d.timeArg(r.Now)
	where := sq.And{
		sq.Eq{"state": activeStates},
		sq.Eq{"lease_owner": nil},
		sq.Gt{"due_at": now},
		which,
	}
	where = eqIfAny(where, "type", r.Types)
	return s.makeDue(ctx, s.sb().Update("operations").Set("due_at", now), where)
}
