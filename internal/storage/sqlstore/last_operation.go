package sqlstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// lastOperationSQL reads, in one statement, the named operation (k 0), the instance's newest
// operation of the types (k 1, through the instance_id/created_at index) and whether the instance
// exists (k 2). Only the reported columns are read: no progress, data or secrets.
func lastOperationSQL(types int) string {
	in := strings.TrimSuffix(strings.Repeat("?, ", types), ", ")
	return "SELECT 0 AS k, id, instance_id, type, state, description, last_error FROM operations WHERE id = ?" +
		" UNION ALL SELECT * FROM (SELECT 1 AS k, id, instance_id, type, state, description, last_error FROM operations" +
		" WHERE instance_id = ? AND type IN (" + in + ") ORDER BY created_at DESC, id DESC LIMIT 1) newest" +
		" UNION ALL SELECT 2 AS k, instance_id, instance_id, '', '', '', '' FROM instances WHERE instance_id = ?"
}

// lastOperationStmt is the prepared statement for that many types: platforms poll
// last_operation, so parsing the SQL once matters (SQLite re-parsed it on every call).
func (s *Store) lastOperationStmt(ctx context.Context, types int) (*sqlx.Stmt, error) {
	s.stmtMu.Lock()
	defer s.stmtMu.Unlock()
	if st, ok := s.lastOpStmts[types]; ok {
		return st, nil
	}
	st, err := s.r.PreparexContext(ctx, s.d.rebind(lastOperationSQL(types)))
	if err != nil {
		return nil, fmt.Errorf("preparing: %w", err)
	}
	if s.lastOpStmts == nil {
		s.lastOpStmts = map[int]*sqlx.Stmt{}
	}
	s.lastOpStmts[types] = st
	return st, nil
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
	st, err := s.lastOperationStmt(ctx, len(types))
	if err != nil {
		return storage.LastOperationRead{}, err
	}
	args := make([]any, 0, len(types)+3)
	args = append(args, operationID, instanceID)
	for _, t := range types {
		args = append(args, t)
	}
	args = append(args, instanceID)
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return storage.LastOperationRead{}, err
	}
	defer rows.Close()
	var out storage.LastOperationRead
	for rows.Next() {
		var (
			k     int
			op    storage.OperationStatus
			state string
		)
		if err := rows.Scan(&k, &op.ID, &op.InstanceID, &op.Type, &state, &op.Description, &op.LastError); err != nil {
			return storage.LastOperationRead{}, err
		}
		op.State = storage.OperationState(state)
		switch k {
		case 0:
			out.Named = &op
		case 1:
			out.Newest = &op
		case 2:
			out.InstanceExists = true
		}
	}
	return out, rows.Err()
}
