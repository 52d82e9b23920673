package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

var _ storage.StaticAllocations = (*Store)(nil)

func (s *Store) StaticAllocations() storage.StaticAllocations { return s }

const staticCols = "pool, runtime_id, host, slots, created_at"

func scanAllocation(r rowScanner) (storage.StaticAllocation, error) {
	var (
		a       storage.StaticAllocation
		created dbTime
	)
	if err := r.Scan(&a.Pool, &a.RuntimeID, &a.Host, &a.Slots, &created); err != nil {
		return storage.StaticAllocation{}, err
	}
	a.CreatedAt = created.value()
	return a, nil
}

// AllocateSlots runs in one write transaction that first takes the pool's lock (PostgreSQL: a
// transaction-scoped advisory lock on "static:<pool>"; SQLite: write transactions are already
// serialised on the single writer connection), so the usage it reads cannot change before its
// insert commits.
func (s *Store) AllocateSlots(ctx context.Context, pool string, hosts []storage.StaticHost, runtimeID string, slots int) (storage.StaticAllocation, error) {
	a, err := s.allocateSlots(ctx, pool, hosts, runtimeID, slots)
	if err != nil {
		return storage.StaticAllocation{}, fmt.Errorf("allocating %d slot(s) in static pool %q for runtime %s: %w", slots, pool, runtimeID, err)
	}
	return a, nil
}

func (s *Store) allocateSlots(ctx context.Context, pool string, hosts []storage.StaticHost, runtimeID string, slots int) (storage.StaticAllocation, error) {
	if err := validateAllocation(pool, hosts, runtimeID, slots); err != nil {
		return storage.StaticAllocation{}, err
	}
	tx, err := s.w.BeginTxx(ctx, nil)
	if err != nil {
		return storage.StaticAllocation{}, err
	}
	defer rollback(tx)
	if s.d.XactLockSQL != "" {
		if _, err := tx.ExecContext(ctx, s.d.rebind(s.d.XactLockSQL), "static:"+pool); err != nil {
			return storage.StaticAllocation{}, fmt.Errorf("locking the pool: %w", err)
		}
	}
	existing, err := scanAllocation(tx.QueryRowxContext(ctx,
		s.d.rebind("SELECT "+staticCols+" FROM static_allocations WHERE pool = ? AND runtime_id = ?"), pool, runtimeID))
	switch {
	case err == nil:
		return existing, nil
	case !errors.Is(err, sql.ErrNoRows):
		return storage.StaticAllocation{}, fmt.Errorf("reading the existing allocation: %w", err)
	}
	used, err := s.usedSlots(ctx, tx, pool)
	if err != nil {
		return storage.StaticAllocation{}, err
	}
	host, ok := pickHost(hosts, used, slots)
	if !ok {
		return storage.StaticAllocation{}, storage.ErrNoCapacity
	}
	created := micro(time.Now())
	out, err := scanAllocation(tx.QueryRowxContext(ctx,
		s.d.rebind("INSERT INTO static_allocations ("+staticCols+") VALUES (?, ?, ?, ?, ?) RETURNING "+staticCols),
		pool, runtimeID, host, slots, s.d.timeArg(created)))
	if err != nil {
		return storage.StaticAllocation{}, fmt.Errorf("inserting the allocation on host %s: %w", host, err)
	}
	if err := tx.Commit(); err != nil {
		return storage.StaticAllocation{}, fmt.Errorf("committing: %w", err)
	}
	return out, nil
}

func validateAllocation(pool string, hosts []storage.StaticHost, runtimeID string, slots int) error {
	switch {
	case pool == "":
		return errors.New("pool is empty")
	case runtimeID == "":
		return errors.New("runtime ID is empty")
	case slots <= 0:
		return fmt.Errorf("invalid slots %d: must be positive", slots)
	case len(hosts) == 0:
		return errors.New("the pool has no hosts")
	}
	seen := make(map[string]bool, len(hosts))
	for i, h := range hosts {
		if h.Host == "" {
			return fmt.Errorf("hosts[%d] has no name", i)
		}
		if seen[h.Host] {
			return fmt.Errorf("host %s is listed twice", h.Host)
		}
		seen[h.Host] = true
	}
	return nil
}

// pickHost returns the host with the most free slots (ties broken by name) that has at least
// slots free.
func pickHost(hosts []storage.StaticHost, used map[string]int, slots int) (string, bool) {
	type candidate struct {
		host string
		free int
	}
	var cands []candidate
	for _, h := range hosts {
		if free := h.Slots - used[h.Host]; free >= slots {
			cands = append(cands, candidate{h.Host, free})
		}
	}
	if len(cands) == 0 {
		return "", false
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].free != cands[j].free {
			return cands[i].free > cands[j].free
		}
		return cands[i].host < cands[j].host
	})
	return cands[0].host, true
}

func (s *Store) GetAllocation(ctx context.Context, pool, runtimeID string) (storage.StaticAllocation, error) {
	a, err := scanAllocation(s.r.QueryRowxContext(ctx,
		s.d.rebind("SELECT "+staticCols+" FROM static_allocations WHERE pool = ? AND runtime_id = ?"), pool, runtimeID))
	if errors.Is(err, sql.ErrNoRows) {
		err = storage.ErrNotFound
	}
	if err != nil {
		return storage.StaticAllocation{}, fmt.Errorf("getting the allocation of runtime %s in static pool %q: %w", runtimeID, pool, err)
	}
	return a, nil
}

func (s *Store) ReleaseSlots(ctx context.Context, pool, runtimeID string) error {
	if _, err := s.w.ExecContext(ctx, s.d.rebind("DELETE FROM static_allocations WHERE pool = ? AND runtime_id = ?"), pool, runtimeID); err != nil {
		return fmt.Errorf("releasing the slots of runtime %s in static pool %q: %w", runtimeID, pool, err)
	}
	return nil
}

func (s *Store) UsedSlots(ctx context.Context, pool string) (map[string]int, error) {
	used, err := s.usedSlots(ctx, s.r, pool)
	if err != nil {
		return nil, fmt.Errorf("reading used slots of static pool %q: %w", pool, err)
	}
	return used, nil
}

func (s *Store) usedSlots(ctx context.Context, q sqlx.QueryerContext, pool string) (map[string]int, error) {
	rows, err := q.QueryxContext(ctx, s.d.rebind("SELECT host, SUM(slots) FROM static_allocations WHERE pool = ? GROUP BY host"), pool)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	used := map[string]int{}
	for rows.Next() {
		var (
			host string
			n    int64
		)
		if err := rows.Scan(&host, &n); err != nil {
			return nil, err
		}
		used[host] = int(n)
	}
	return used, rows.Err()
}
