package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// runtimeOperationStatusSQL reads an operation's reported columns and its runtime's in one
// statement. Whether the data configures Kyma is asked of the database (data.config.kyma as JSON
// text, 'null' for a JSON null, NULL when absent): decoding the whole data document in the broker
// was the largest cost of a poll.
func runtimeOperationStatusSQL(d Dialect) string {
	return "SELECT o.id, o.instance_id, o.type, o.state, o.description, o.last_error, o.stage," +
		" CAST((o.data" + d.JSONCast + ") -> 'config' -> 'kyma' AS TEXT)," +
		" r.id IS NOT NULL, COALESCE(r.tenant, ''), COALESCE(r.compass_runtime_id, ''), COALESCE(r.deleted, FALSE)" +
		" FROM operations o LEFT JOIN runtimes r ON r.id = o.instance_id WHERE o.id = ?"
}

func (s *Store) ReadRuntimeOperationStatus(ctx context.Context, operationID string) (storage.RuntimeOperationStatus, error) {
	out, err := s.readRuntimeOperationStatus(ctx, operationID)
	if errors.Is(err, sql.ErrNoRows) {
		err = storage.ErrNotFound
	}
	if err != nil {
		return storage.RuntimeOperationStatus{}, fmt.Errorf("reading the status of operation %s: %w", operationID, err)
	}
	return out, nil
}

func (s *Store) readRuntimeOperationStatus(ctx context.Context, operationID string) (storage.RuntimeOperationStatus, error) {
	st, err := s.preparedRead(ctx, "runtime_operation_status", func() string { return runtimeOperationStatusSQL(s.d) })
	if err != nil {
		return storage.RuntimeOperationStatus{}, err
	}
	var (
		out   storage.RuntimeOperationStatus
		state string
		kyma  sql.NullString
	)
	if err := st.QueryRowContext(s.readContext(ctx), operationID).Scan(&out.ID, &out.InstanceID, &out.Type, &state, &out.Description,
		&out.LastError, &out.Stage, &kyma, &out.RuntimeFound, &out.Tenant, &out.CompassRuntimeID, &out.Deleted); err != nil {
		return storage.RuntimeOperationStatus{}, err
	}
	out.State = storage.OperationState(state)
	out.Kyma = kyma.Valid && kyma.String != "null"
	return out, nil
}
