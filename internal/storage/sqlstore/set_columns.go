package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	sq "github.com/Masterminds/squirrel"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// column is one NOT NULL text column and the value setColumns gives it.
type column struct {
	name  string
	value string
}

// setColumns writes cols of the row id of table in one statement, with updated_at and the
// version's increment, unless every column already has its value: a step that stores one ID
// neither reads the whole row (secrets decrypted) nor writes it back (secrets re-encrypted,
// rewritten out of line), and a step run again writes nothing.
func (s *Store) setColumns(ctx context.Context, table, idCol, id string, cols []column) error {
	upd, ok := s.columnsUpdate(table, idCol, id, cols, time.Now())
	if !ok {
		return nil
	}
	return s.updateOne(ctx, upd, func() error {
		// Nothing written: the row has these values already, or there is none.
		if err := s.missingOrConflict(ctx, table, idCol, id); !errors.Is(err, storage.ErrConflict) {
			return err
		}
		return nil
	})
}

// columnsUpdate is setColumns' statement; false when cols is empty.
func (s *Store) columnsUpdate(table, idCol, id string, cols []column, now time.Time) (sq.UpdateBuilder, bool) {
	if len(cols) == 0 {
		return sq.UpdateBuilder{}, false
	}
	upd := s.sb().Update(table)
	changed := sq.Or{}
	for _, c := range cols {
		upd = upd.Set(c.name, c.value)
		changed = append(changed, sq.NotEq{c.name: c.value})
	}
	return upd.Set("updated_at", s.d.timeArg(now)).Set("version", sq.Expr("version + 1")).
		Where(sq.And{sq.Eq{idCol: id}, changed}), true
}

// instanceColumns are the columns f sets (none for nil).
func instanceColumns(f *storage.InstanceFields) []column {
	var cols []column
	if f == nil {
		return cols
	}
	if f.RuntimeID != nil {
		cols = append(cols, column{"runtime_id", *f.RuntimeID})
	}
	if f.DashboardURL != nil {
		cols = append(cols, column{"dashboard_url", *f.DashboardURL})
	}
	if f.ShootName != nil {
		cols = append(cols, column{"shoot_name", *f.ShootName})
	}
	return cols
}

// runtimeColumns are the columns f sets (none for nil).
func runtimeColumns(f *storage.RuntimeFields) []column {
	if f == nil || f.CompassRuntimeID == nil {
		return nil
	}
	return []column{{"compass_runtime_id", *f.CompassRuntimeID}}
}

func (s *Store) SetInstanceFields(ctx context.Context, id string, f storage.InstanceFields) error {
	if err := s.setColumns(ctx, "instances", "instance_id", id, instanceColumns(&f)); err != nil {
		return fmt.Errorf("setting fields of instance %s: %w", id, err)
	}
	return nil
}

func (s *Store) SetCompassRuntimeID(ctx context.Context, id, compassID string) error {
	if err := s.setColumns(ctx, "runtimes", "id", id, runtimeColumns(&storage.RuntimeFields{CompassRuntimeID: &compassID})); err != nil {
		return fmt.Errorf("setting the Compass ID of runtime %s: %w", id, err)
	}
	return nil
}
