package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/jmoiron/sqlx"
)

// stmtCache holds a pool's prepared statements: named ones (a fixed set, each built the first
// time its name is asked for: the polled reads) and ones
// keyed by their text (the writer's per-provisioning statements).
//
// Text-keyed statements are built by squirrel, so each shape has one text. Unprepared, each
// execution is parsed and planned anew: lib/pq sends a statement with parameters as an unnamed
// one, and PostgreSQL spent a measurable share of each provisioning planning the hot ones
// (wake-ups, claims, instance and runtime updates). A prepared statement is parsed
// once per connection and, when its plan does not depend on its parameters, planned once.
//
// The cache keeps at most maxCachedStmts texts; a text beyond them (an IN list of a new length)
// runs unprepared, so a caller's varying shapes cannot grow it without bound. Each text is
// prepared on every connection that runs it (PostgreSQL keeps its plan per session), so
// statements whose text varies with their input (lease extensions, ~1 ID per held lease) stay
// out of it.
type stmtCache struct {
	db *sqlx.DB

	mu    sync.Mutex
	named map[string]*sqlx.Stmt
	texts map[string]*sqlx.Stmt
}

const maxCachedStmts = 128

func newStmtCache(db *sqlx.DB) *stmtCache {
	return &stmtCache{db: db, named: map[string]*sqlx.Stmt{}, texts: map[string]*sqlx.Stmt{}}
}

// byName is the statement of query (built only the first time key is asked for).
func (c *stmtCache) byName(ctx context.Context, key string, query func() string) (*sqlx.Stmt, error) {
	st, err := c.lookup(ctx, c.named, key, query, false)
	if err != nil {
		return nil, fmt.Errorf("preparing: %w", err)
	}
	return st, nil
}

// stmt is the prepared statement of q, or nil when q is to run unprepared.
func (c *stmtCache) stmt(ctx context.Context, q string) (*sqlx.Stmt, error) {
	return c.lookup(ctx, c.texts, q, func() string { return q }, true)
}

// lookup finds key in m or prepares query for it; bounded refuses (nil) a new key in a full m.
// It prepares outside the lock (a round trip): other keys' callers do not wait for it.
func (c *stmtCache) lookup(ctx context.Context, m map[string]*sqlx.Stmt, key string, query func() string, bounded bool) (*sqlx.Stmt, error) {
	c.mu.Lock()
	st, ok := m[key]
	full := bounded && len(m) >= maxCachedStmts
	c.mu.Unlock()
	if ok || full {
		return st, nil
	}
	st, err := c.db.PreparexContext(ctx, query())
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if first, ok := m[key]; ok {
		// Another caller prepared it meanwhile.
		_ = st.Close()
		return first, nil
	}
	if bounded && len(m) >= maxCachedStmts {
		_ = st.Close()
		return nil, nil
	}
	m[key] = st
	return st, nil
}

// exec, queryx and queryRowx run q prepared, or unprepared when the cache refuses it (full)
// or preparing failed (running it then reports the error).
func (c *stmtCache) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	st, err := c.stmt(ctx, q)
	if err != nil || st == nil {
		return c.db.ExecContext(ctx, q, args...)
	}
	return st.ExecContext(ctx, args...)
}

func (c *stmtCache) queryx(ctx context.Context, q string, args ...any) (*sqlx.Rows, error) {
	st, err := c.stmt(ctx, q)
	if err != nil || st == nil {
		return c.db.QueryxContext(ctx, q, args...)
	}
	return st.QueryxContext(ctx, args...)
}

func (c *stmtCache) queryRowx(ctx context.Context, q string, args ...any) *sqlx.Row {
	st, err := c.stmt(ctx, q)
	if err != nil || st == nil {
		return c.db.QueryRowxContext(ctx, q, args...)
	}
	return st.QueryRowxContext(ctx, args...)
}

func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, m := range []map[string]*sqlx.Stmt{c.named, c.texts} {
		for key, st := range m {
			errs = append(errs, st.Close())
			delete(m, key)
		}
	}
	return errors.Join(errs...)
}
