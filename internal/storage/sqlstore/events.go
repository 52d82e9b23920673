package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/jmoiron/sqlx"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

const (
	// eventWriteCols are what every insert of events writes (InsertEvents, SaveProgress in its
	// three forms), in this order: one list, so a new column cannot miss one of them.
	eventWriteCols = "operation_id, instance_id, " + eventOwnCols
	// eventOwnCols are an event's columns other than its operation's and instance's IDs.
	eventOwnCols = "step, stage, type, message, duration_us, wait_us, created_at"
	eventCols    = "id, " + eventWriteCols
	// eventsPerInsert keeps one INSERT below SQLite's and PostgreSQL's bind parameter limits.
	eventsPerInsert = 500
)

func (s *Store) InsertEvents(ctx context.Context, events ...storage.Event) error {
	if len(events) == 0 {
		return nil
	}
	now := time.Now()
	events = append([]storage.Event(nil), events...) // do not modify the caller's slice
	for i := range events {
		if events[i].CreatedAt.IsZero() {
			events[i].CreatedAt = now
		}
	}
	tx, err := s.w.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("inserting %d events: %w", len(events), err)
	}
	defer rollback(tx)
	if err := s.insertEvents(ctx, tx, events); err != nil {
		return fmt.Errorf("inserting %d events: %w", len(events), err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("inserting %d events: %w", len(events), err)
	}
	return nil
}

func (s *Store) insertEvents(ctx context.Context, ex sqlx.ExecerContext, events []storage.Event) error {
	for len(events) > 0 {
		chunk := events[:min(len(events), eventsPerInsert)]
		events = events[len(chunk):]
		ins := s.sb().Insert("events").Columns(strings.Split(eventWriteCols, ", ")...)
		for _, e := range chunk {
			ins = ins.Values(e.OperationID, e.InstanceID, e.Step, e.Stage, string(e.Type), e.Message,
				e.Duration.Microseconds(), e.Wait.Microseconds(), s.d.timeArg(e.CreatedAt))
		}
		q, args, err := ins.ToSql()
		if err != nil {
			return err
		}
		if _, err := ex.ExecContext(ctx, q, args...); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) ListEvents(ctx context.Context, f storage.EventFilter) (storage.Page[storage.Event], error) {
	if err := checkLists("listing events", len(f.InstanceIDs), len(f.OperationIDs), len(f.Types), len(f.Stages)); err != nil {
		return storage.Page[storage.Event]{}, err
	}
	page, err := s.listEvents(ctx, f)
	if err != nil {
		return storage.Page[storage.Event]{}, fmt.Errorf("listing events: %w", err)
	}
	return page, nil
}

func (s *Store) listEvents(ctx context.Context, f storage.EventFilter) (storage.Page[storage.Event], error) {
	where := sq.And{}
	if len(f.InstanceIDs) > 0 {
		// Events have no instance index (migration 0091, one index entry less per transition):
		// an instance's events are found through its operations.
		ops := sq.Select("id").From("operations").Where(sq.Eq{"instance_id": f.InstanceIDs})
		where = append(where, sq.Expr("operation_id IN (?)", ops), sq.Eq{"instance_id": f.InstanceIDs})
	}
	where = eqIfAny(where, "operation_id", f.OperationIDs)
	types := make([]string, len(f.Types))
	for i, t := range f.Types {
		types[i] = string(t)
	}
	where = eqIfAny(where, "type", types)
	where = eqIfAny(where, "stage", f.Stages)
	if f.AfterID > 0 {
		where = append(where, sq.Gt{"id": f.AfterID})
	}
	if f.BeforeID > 0 {
		where = append(where, sq.Lt{"id": f.BeforeID})
	}
	order := "id"
	if f.Descending {
		order = "id DESC"
	}
	return listPage(ctx, s, pageQuery{table: "events", cols: eventCols, where: where, order: []string{order}, paging: f.Paging}, scanEvent)
}

func scanEvent(r rowScanner) (storage.Event, error) {
	var (
		e         storage.Event
		typ       string
		dur, wait int64
		created   dbTime
	)
	if err := r.Scan(&e.ID, &e.OperationID, &e.InstanceID, &e.Step, &e.Stage, &typ, &e.Message, &dur, &wait, &created); err != nil {
		return storage.Event{}, err
	}
	e.Type = storage.EventType(typ)
	e.Duration, e.Wait = time.Duration(dur)*time.Microsecond, time.Duration(wait)*time.Microsecond
	e.CreatedAt = created.value()
	return e, nil
}
