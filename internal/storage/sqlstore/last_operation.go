package sqlstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Platforms poll last_operation naming the operation they were given, so the common read is
// two primary-key lookups: the named operation and whether the instance exists. Only when no
// operation is named, or the named one is unknown, is the instance's newest operation of the
// types read (through the (instance_id, created_at, id) index, which stops at the first row).
// Only the reported columns are read: no progress, data or secrets.
// The named read answers in one row (whether the operation was found, its columns, whether the
// instance exists): a second row cost a step, a scan and its strings per poll.
const namedOperationSQL = "SELECT o.id IS NOT NULL, COALESCE(o.id, ''), COALESCE(o.instance_id, ''), COALESCE(o.type, ''), COALESCE(o.state, '')," +
	" COALESCE(o.description, ''), COALESCE(o.last_error, ''), EXISTS (SELECT 1 FROM instances WHERE instance_id = ?)" +
	" FROM (SELECT ? AS id) r LEFT JOIN operations o ON o.id = r.id"

func newestOperationSQL(types int) string {
	in := strings.TrimSuffix(strings.Repeat("?, ", types), ", ")
	return "SELECT * FROM (SELECT 1 AS k, id, instance_id, type, state, description, last_error FROM operations" +
		" WHERE instance_id = ? AND type IN (" + in + ") ORDER BY created_at DESC, id DESC LIMIT 1) newest" +
		" UNION ALL SELECT 2 AS k, '', '', '', '', '', '' WHERE EXISTS (SELECT 1 FROM instances WHERE instance_id = ?)"
}

// lastOperationStmt is the prepared statement for the named read (types 0) or the newest
// read of that many types: platforms poll last_operation, so parsing the SQL once matters
// (SQLite re-parsed it on every call).
func (s *Store) lastOperationStmt(ctx context.Context, types int) (*sqlx.Stmt, error) {
	if types == 0 { // the platforms' usual poll: a constant key, nothing built per call
		return s.preparedRead(ctx, "last_operation", func() string { return namedOperationSQL })
	}
	return s.preparedRead(ctx, "last_operation/"+strconv.Itoa(types), func() string { return newestOperationSQL(types) })
}

func (s *Store) ReadLastOperation(ctx context.Context, instanceID, operationID string, types []string) (storage.LastOperationRead, error) {
	out, err := s.readLastOperation(ctx, instanceID, operationID, types)
	if err != nil {
		return storage.LastOperationRead{}, fmt.Errorf("reading the last operation of instance %s: %w", instanceID, err)
	}
	return out, nil
}

func (s *Store) readLastOperation(ctx context.Context, instanceID, operationID string, types []string) (storage.LastOperationRead, error) {
	if len(types) == 0 {
		return storage.LastOperationRead{}, fmt.Errorf("no operation types")
	}
	var out storage.LastOperationRead
	if operationID != "" {
		var err error
		if s.lastOps != nil {
			out, err = s.lastOps.submit(ctx, lastOpCall{instanceID: instanceID, operationID: operationID})
		} else {
			err = s.queryNamedOperation(ctx, &out, instanceID, operationID)
		}
		if err != nil {
			return storage.LastOperationRead{}, err
		}
		if out.Named != nil {
			return out, nil
		}
	}
	args := make([]any, 0, len(types)+2)
	args = append(args, instanceID)
	for _, t := range types {
		args = append(args, t)
	}
	args = append(args, instanceID)
	out.InstanceExists = false
	if err := s.queryLastOperation(ctx, len(types), &out, args...); err != nil {
		return storage.LastOperationRead{}, err
	}
	return out, nil
}

// readContext is the context of last_operation's statements: not cancellable where reads are
// local (Dialect.LocalReads).
func (s *Store) readContext(ctx context.Context) context.Context {
	if s.d.LocalReads {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// queryNamedOperation runs the named read (namedOperationSQL).
func (s *Store) queryNamedOperation(ctx context.Context, out *storage.LastOperationRead, instanceID, operationID string) error {
	st, err := s.lastOperationStmt(ctx, 0)
	if err != nil {
		return err
	}
	var (
		found bool
		op    storage.OperationStatus
		state string
	)
	if err := st.QueryRowContext(s.readContext(ctx), instanceID, operationID).Scan(&found, &op.ID, &op.InstanceID, &op.Type, &state,
		&op.Description, &op.LastError, &out.InstanceExists); err != nil {
		return err
	}
	if found {
		op.State = storage.OperationState(state)
		out.Named = &op
	}
	return nil
}

// queryLastOperation runs the newest read of that many types, filling out from its rows.
func (s *Store) queryLastOperation(ctx context.Context, types int, out *storage.LastOperationRead, args ...any) error {
	st, err := s.lastOperationStmt(ctx, types)
	if err != nil {
		return err
	}
	rows, err := st.QueryContext(s.readContext(ctx), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			k     int
			op    storage.OperationStatus
			state string
		)
		if err := rows.Scan(&k, &op.ID, &op.InstanceID, &op.Type, &state, &op.Description, &op.LastError); err != nil {
			return err
		}
		op.State = storage.OperationState(state)
		switch k {
		case 1:
			out.Newest = &op
		case 2:
			out.InstanceExists = true
		}
	}
	return rows.Err()
}
