package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

const bindingCols = "id, instance_id, request, secrets, created_at"

func (s *Store) Bindings() storage.Bindings { return s }

func (s *Store) InsertBinding(ctx context.Context, b storage.Binding) (storage.Binding, error) {
	if b.ID == "" || b.InstanceID == "" {
		return storage.Binding{}, errors.New("inserting binding: ID and instance ID are required")
	}
	sec, err := s.encryptSecrets(b.Credentials)
	if err != nil {
		return storage.Binding{}, fmt.Errorf("inserting binding %s: %w", b.ID, err)
	}
	if b.CreatedAt.IsZero() {
		b.CreatedAt = time.Now()
	}
	b.CreatedAt = micro(b.CreatedAt)
	_, err = s.w.ExecContext(ctx, s.d.rebind("INSERT INTO bindings ("+bindingCols+") VALUES (?, ?, ?, ?, ?)"),
		b.ID, b.InstanceID, string(b.Request), sec, s.d.timeArg(b.CreatedAt))
	if err != nil {
		if s.d.IsUniqueViolation(err) {
			err = storage.ErrAlreadyExists
		}
		return storage.Binding{}, fmt.Errorf("inserting binding %s: %w", b.ID, err)
	}
	return b, nil
}

func (s *Store) GetBinding(ctx context.Context, instanceID, bindingID string) (storage.Binding, error) {
	var (
		b       storage.Binding
		request string
		secrets []byte
		created dbTime
	)
	err := s.r.QueryRowxContext(ctx, s.d.rebind("SELECT "+bindingCols+" FROM bindings WHERE id = ? AND instance_id = ?"), bindingID, instanceID).
		Scan(&b.ID, &b.InstanceID, &request, &secrets, &created)
	if errors.Is(err, sql.ErrNoRows) {
		err = storage.ErrNotFound
	}
	if err != nil {
		return storage.Binding{}, fmt.Errorf("getting binding %s of instance %s: %w", bindingID, instanceID, err)
	}
	b.Request, b.CreatedAt = []byte(request), created.value()
	if b.Credentials, err = s.decryptSecrets(secrets); err != nil {
		return storage.Binding{}, fmt.Errorf("binding %s: %w", bindingID, err)
	}
	return b, nil
}

func (s *Store) DeleteBinding(ctx context.Context, instanceID, bindingID string) error {
	res, err := s.w.ExecContext(ctx, s.d.rebind("DELETE FROM bindings WHERE id = ? AND instance_id = ?"), bindingID, instanceID)
	if err != nil {
		return fmt.Errorf("deleting binding %s of instance %s: %w", bindingID, instanceID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("deleting binding %s of instance %s: %w", bindingID, instanceID, err)
	} else if n == 0 {
		return fmt.Errorf("deleting binding %s of instance %s: %w", bindingID, instanceID, storage.ErrNotFound)
	}
	return nil
}

// readForBindSQL reads the instance with, in the same row, the binding of that ID (any
// instance's: a binding ID is unique) and the state of the instance's newest operation of a
// type (through the (instance_id, created_at, id) index, which stops at the first row).
func readForBindSQL() string {
	return "SELECT " + qualified("i", instanceCols) + ", " + qualified("b", bindingCols) + "," +
		" (SELECT o.state FROM operations o WHERE o.instance_id = i.instance_id AND o.type = ? ORDER BY o.created_at DESC, o.id DESC LIMIT 1)" +
		" FROM instances i LEFT JOIN bindings b ON b.id = ? WHERE i.instance_id = ?"
}

// qualified is the comma-separated columns cols, each prefixed with table.
func qualified(table, cols string) string {
	parts := strings.Split(cols, ", ")
	for i, c := range parts {
		parts[i] = table + "." + c
	}
	return strings.Join(parts, ", ")
}

func (s *Store) ReadForBind(ctx context.Context, instanceID, bindingID, opType string) (storage.BindRead, error) {
	out, err := s.readForBind(ctx, instanceID, bindingID, opType)
	if err != nil {
		return storage.BindRead{}, fmt.Errorf("reading instance %s and binding %s: %w", instanceID, bindingID, err)
	}
	return out, nil
}

func (s *Store) readForBind(ctx context.Context, instanceID, bindingID, opType string) (storage.BindRead, error) {
	// Prepared once: a statement prepared per call would cost its own round trip.
	st, err := s.preparedRead(ctx, "read_for_bind", readForBindSQL)
	if err != nil {
		return storage.BindRead{}, err
	}
	var (
		out               storage.BindRead
		id, inst, request sql.NullString
		secrets           []byte
		created           dbTime
		latest            sql.NullString
	)
	out.Instance, err = s.scanInstanceWith(st.QueryRowxContext(ctx, opType, bindingID, instanceID), &id, &inst, &request, &secrets, &created, &latest)
	if errors.Is(err, sql.ErrNoRows) {
		return storage.BindRead{}, storage.ErrNotFound
	}
	if err != nil {
		return storage.BindRead{}, err
	}
	out.LatestState = storage.OperationState(latest.String)
	if !id.Valid {
		return out, nil
	}
	b := storage.Binding{ID: id.String, InstanceID: inst.String, Request: []byte(request.String), CreatedAt: created.value()}
	if b.Credentials, err = s.decryptSecrets(secrets); err != nil {
		return storage.BindRead{}, fmt.Errorf("binding %s: %w", bindingID, err)
	}
	out.Binding = &b
	return out, nil
}
