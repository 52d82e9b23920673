package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	sq "github.com/Masterminds/squirrel"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// column is one column and the value setColumns gives it.
type column struct {
	name  string
	value any
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
		// NULL-safe: a kubeconfig column may hold none yet.
		changed = append(changed, sq.Expr(c.name+" IS DISTINCT FROM ?", c.value))
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
		cols = append(cols, column{name: "runtime_id", value: *f.RuntimeID})
	}
	if f.DashboardURL != nil {
		cols = append(cols, column{name: "dashboard_url", value: *f.DashboardURL})
	}
	if f.ShootName != nil {
		cols = append(cols, column{name: "shoot_name", value: *f.ShootName})
	}
	return cols
}

// runtimeColumns are the columns f sets (none for nil); kubeconfig is f's Kubeconfig encrypted
// (opWrite.kubeconfig), nil when f sets none.
func runtimeColumns(f *storage.RuntimeFields, kubeconfig any) []column {
	if f == nil {
		return nil
	}
	var cols []column
	if f.CompassRuntimeID != nil {
		cols = append(cols, column{name: "compass_runtime_id", value: *f.CompassRuntimeID})
	}
	if kubeconfig != nil {
		cols = append(cols, column{name: "kubeconfig", value: kubeconfig})
	}
	return cols
}

func (s *Store) SetInstanceFields(ctx context.Context, id string, f storage.InstanceFields) error {
	if err := s.setColumns(ctx, "instances", "instance_id", id, instanceColumns(&f)); err != nil {
		return fmt.Errorf("setting fields of instance %s: %w", id, err)
	}
	return nil
}

func (s *Store) SetRuntimeFields(ctx context.Context, id string, f storage.RuntimeFields) error {
	kc, err := s.encryptKubeconfig(f.Kubeconfig)
	if err != nil {
		return fmt.Errorf("setting fields of runtime %s: %w", id, err)
	}
	if err := s.setColumns(ctx, "runtimes", "id", id, runtimeColumns(&f, kc)); err != nil {
		return fmt.Errorf("setting fields of runtime %s: %w", id, err)
	}
	return nil
}
