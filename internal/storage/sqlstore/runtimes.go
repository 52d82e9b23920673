package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/jmoiron/sqlx"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

const runtimeCols = "id, tenant, name, backend, compass_runtime_id, config, allocation, secrets, deleted, created_at, updated_at, version, kubeconfig"

func (s *Store) Runtimes() storage.Runtimes { return s }

func (s *Store) scanRuntime(r rowScanner) (storage.Runtime, error) {
	var (
		rt               storage.Runtime
		config           sql.NullString
		allocation       sql.NullString
		secrets, kc      []byte
		created, updated dbTime
	)
	if err := r.Scan(&rt.ID, &rt.Tenant, &rt.Name, &rt.Backend, &rt.CompassRuntimeID, &config, &allocation, &secrets, &rt.Deleted,
		&created, &updated, &rt.Version, &kc); err != nil {
		return storage.Runtime{}, err
	}
	if config.Valid && config.String != "" {
		rt.Config = []byte(config.String)
	}
	if allocation.Valid && allocation.String != "" {
		rt.Allocation = []byte(allocation.String)
	}
	rt.CreatedAt, rt.UpdatedAt = created.value(), updated.value()
	sec, err := s.decryptSecrets(secrets)
	if err != nil {
		return storage.Runtime{}, fmt.Errorf("runtime %s: %w", rt.ID, err)
	}
	// The kubeconfig's column wins over a copy in the secrets (a runtime written before the
	// column keeps its kubeconfig there until its next write).
	if kc != nil {
		plain, err := s.kr.Decrypt(kc)
		if err != nil {
			return storage.Runtime{}, fmt.Errorf("runtime %s: decrypting the kubeconfig: %w", rt.ID, err)
		}
		if sec == nil {
			sec = storage.Secrets{}
		}
		sec[storage.KubeconfigSecret] = string(plain)
	}
	rt.Secrets = sec
	return rt, nil
}

// encryptRuntimeSecrets encrypts a runtime's secrets for its two columns: the kubeconfig on its
// own (nil when there is none) and the rest.
func (s *Store) encryptRuntimeSecrets(sec storage.Secrets) (rest, kubeconfig any, err error) {
	var kc *string
	if v, ok := sec[storage.KubeconfigSecret]; ok {
		kc = &v
		others := make(storage.Secrets, len(sec)-1)
		for k, v := range sec {
			if k != storage.KubeconfigSecret {
				others[k] = v
			}
		}
		sec = others
	}
	if rest, err = s.encryptSecrets(sec); err != nil {
		return nil, nil, err
	}
	if kubeconfig, err = s.encryptKubeconfig(kc); err != nil {
		return nil, nil, err
	}
	return rest, kubeconfig, nil
}

// encryptKubeconfig is the kubeconfig column's value: NULL when there is none (nil).
func (s *Store) encryptKubeconfig(kc *string) (any, error) {
	if kc == nil {
		return nil, nil
	}
	ct, err := s.kr.Encrypt([]byte(*kc))
	if err != nil {
		return nil, fmt.Errorf("encrypting the kubeconfig: %w", err)
	}
	return ct, nil
}

func (s *Store) InsertRuntimeWithOperation(ctx context.Context, rt storage.Runtime, op storage.Operation) (storage.Runtime, storage.Operation, error) {
	outRt, outOp, err := s.insertRuntimeWithOperation(ctx, rt, op)
	if err != nil {
		return storage.Runtime{}, storage.Operation{}, fmt.Errorf("inserting runtime %s with operation %s: %w", rt.ID, op.ID, err)
	}
	return outRt, outOp, nil
}

func (s *Store) insertRuntimeWithOperation(ctx context.Context, rt storage.Runtime, op storage.Operation) (storage.Runtime, storage.Operation, error) {
	if rt.ID == "" {
		return storage.Runtime{}, storage.Operation{}, errors.New("runtime ID is empty")
	}
	if op.InstanceID != rt.ID {
		return storage.Runtime{}, storage.Operation{}, fmt.Errorf("operation is for %q, not for the runtime", op.InstanceID)
	}
	sec, kc, err := s.encryptRuntimeSecrets(rt.Secrets)
	if err != nil {
		return storage.Runtime{}, storage.Operation{}, err
	}
	now := micro(time.Now())
	created := now
	if !rt.CreatedAt.IsZero() {
		created = rt.CreatedAt
	}
	q, args, err := sq.Insert("runtimes").
		Columns("id", "tenant", "name", "backend", "compass_runtime_id", "config", "allocation", "secrets", "deleted", "created_at", "updated_at", "version", "kubeconfig").
		Values(rt.ID, rt.Tenant, rt.Name, rt.Backend, rt.CompassRuntimeID, nullJSON(rt.Config), nullJSON(rt.Allocation), sec, rt.Deleted,
			s.d.timeArg(created), s.d.timeArg(now), 1, kc).
		Suffix("RETURNING " + runtimeCols).ToSql()
	if err != nil {
		return storage.Runtime{}, storage.Operation{}, err
	}
	return insertWithFirstOperation(ctx, s, q, args, op, s.scanRuntime, nil)
}

func (s *Store) GetRuntime(ctx context.Context, id string) (storage.Runtime, error) {
	// Prepared once: the provisioner's steps read their runtime several times per operation.
	return getByID(ctx, s, "runtime", "get_runtime", "SELECT "+runtimeCols+" FROM runtimes WHERE id = ?", id, s.scanRuntime)
}

func (s *Store) UpdateRuntime(ctx context.Context, rt storage.Runtime) (storage.Runtime, error) {
	out, err := s.updateRuntime(ctx, rt)
	if err != nil {
		return storage.Runtime{}, fmt.Errorf("updating runtime %s (version %d): %w", rt.ID, rt.Version, err)
	}
	return out, nil
}

func (s *Store) updateRuntime(ctx context.Context, rt storage.Runtime) (storage.Runtime, error) {
	sec, kc, err := s.encryptRuntimeSecrets(rt.Secrets)
	if err != nil {
		return storage.Runtime{}, err
	}
	q, args, err := s.sb().Update("runtimes").
		Set("tenant", rt.Tenant).
		Set("name", rt.Name).
		Set("backend", rt.Backend).
		Set("compass_runtime_id", rt.CompassRuntimeID).
		Set("config", nullJSON(rt.Config)).
		Set("allocation", nullJSON(rt.Allocation)).
		Set("secrets", sec).
		Set("kubeconfig", kc).
		Set("deleted", rt.Deleted).
		Set("updated_at", s.d.timeArg(time.Now())).
		Set("version", sq.Expr("version + 1")).
		Where(sq.Eq{"id": rt.ID, "version": rt.Version}).
		Suffix("RETURNING " + runtimeCols).ToSql()
	if err != nil {
		return storage.Runtime{}, err
	}
	out, err := s.scanRuntime(s.writes.queryRowx(ctx, q, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return storage.Runtime{}, s.missingOrConflict(ctx, "runtimes", "id", rt.ID)
	}
	return out, err
}

func (s *Store) ListRuntimes(ctx context.Context, f storage.RuntimeFilter) (storage.Page[storage.Runtime], error) {
	if err := checkLists("listing runtimes", len(f.IDs), len(f.Tenants)); err != nil {
		return storage.Page[storage.Runtime]{}, err
	}
	out, err := s.listRuntimes(ctx, f)
	if err != nil {
		return storage.Page[storage.Runtime]{}, fmt.Errorf("listing runtimes: %w", err)
	}
	return out, nil
}

func (s *Store) listRuntimes(ctx context.Context, f storage.RuntimeFilter) (storage.Page[storage.Runtime], error) {
	where := sq.And{}
	where = eqIfAny(where, "id", f.IDs)
	where = eqIfAny(where, "tenant", f.Tenants)
	if !f.IncludeDeleted {
		where = append(where, sq.Eq{"deleted": false})
	}
	return listPage(ctx, s, pageQuery{table: "runtimes", cols: runtimeCols, where: where, order: []string{"created_at", "id"}, paging: f.Paging}, s.scanRuntime)
}

func (s *Store) StartRuntimeOperation(ctx context.Context, op storage.Operation) (storage.Operation, error) {
	out, err := s.startRuntimeOperation(ctx, op)
	if err != nil {
		return storage.Operation{}, fmt.Errorf("starting %s operation on runtime %s: %w", op.Type, op.InstanceID, err)
	}
	s.notify(ctx)
	return out, nil
}

func (s *Store) startRuntimeOperation(ctx context.Context, op storage.Operation) (storage.Operation, error) {
	tx, err := s.w.BeginTxx(ctx, nil)
	if err != nil {
		return storage.Operation{}, err
	}
	defer rollback(tx)
	// The runtime row is the lock that serialises operation starts for one runtime (SQLite
	// transactions are already exclusive).
	lock := "SELECT deleted FROM runtimes WHERE id = ?"
	if s.d.SkipLocked {
		lock += " FOR UPDATE"
	}
	var deleted bool
	if err := tx.QueryRowxContext(ctx, s.d.rebind(lock), op.InstanceID).Scan(&deleted); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return storage.Operation{}, storage.ErrNotFound
		}
		return storage.Operation{}, err
	}
	if deleted {
		return storage.Operation{}, storage.ErrNotFound
	}
	if err := s.noActiveOperation(ctx, tx, op.InstanceID); err != nil {
		return storage.Operation{}, err
	}
	out, err := s.insertOperation(ctx, tx, op)
	if err != nil {
		return storage.Operation{}, err
	}
	return out, tx.Commit()
}

func (s *Store) noActiveOperation(ctx context.Context, tx *sqlx.Tx, runtimeID string) error {
	q, args, err := s.sb().Select("id").From("operations").
		Where(sq.Eq{"instance_id": runtimeID, "state": activeStates}).Limit(1).ToSql()
	if err != nil {
		return err
	}
	var id string
	switch err := tx.QueryRowxContext(ctx, q, args...).Scan(&id); {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("%w: operation %s", storage.ErrOperationInProgress, id)
}
