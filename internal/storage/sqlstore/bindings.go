package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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
