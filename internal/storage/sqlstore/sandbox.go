package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"unicode/utf8"

	sq "github.com/Masterminds/squirrel"
	"github.com/jmoiron/sqlx"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// SandboxObjects implements storage.SandboxObjects on the sandbox_objects table.
type SandboxObjects struct {
	db *sqlx.DB
	d  Dialect
	// prepare, when set, returns the statement of a query prepared once (Store.preparedWrite):
	// a stand-in reads and writes on every request.
	prepare func(ctx context.Context, key, query string) (*sqlx.Stmt, error)
	// writes, when set, coalesces the systems' upserts (sandbox_batch.go) onto the sessions
	// of startWriter's pool.
	writes *coalescer[sandboxWrite, struct{}]
}

var _ storage.SandboxObjects = (*SandboxObjects)(nil)

// NewSandboxObjects returns the sandbox objects of a migrated database (its writer).
func NewSandboxObjects(db *sqlx.DB, d Dialect) *SandboxObjects { return &SandboxObjects{db: db, d: d} }

// SandboxObjects are kept in the store's database.
func (s *Store) SandboxObjects() storage.SandboxObjects { return s.sandbox }

// sandboxGetSQL is the point read, run on nearly every stand-in request.
const sandboxGetSQL = "SELECT value FROM sandbox_objects WHERE system = ? AND kind = ? AND object_key = ?"

// queryRow runs query, prepared once when the objects come from a Store.
func (o *SandboxObjects) queryRow(ctx context.Context, key, query string, args ...any) *sqlx.Row {
	if o.prepare != nil {
		if st, err := o.prepare(ctx, key, query); err == nil {
			return st.QueryRowxContext(ctx, args...)
		}
	}
	return o.db.QueryRowxContext(ctx, o.d.rebind(query), args...)
}

// exec runs query, prepared once when the objects come from a Store.
func (o *SandboxObjects) exec(ctx context.Context, key, query string, args ...any) error {
	if o.prepare != nil {
		if st, err := o.prepare(ctx, key, query); err == nil {
			_, err = st.ExecContext(ctx, args...)
			return err
		}
	}
	_, err := o.db.ExecContext(ctx, o.d.rebind(query), args...)
	return err
}

// Load implements storage.SandboxObjects.
func (o *SandboxObjects) Load(ctx context.Context, system string) (map[string]map[string][]byte, error) {
	rows, err := o.db.QueryxContext(ctx, o.d.rebind("SELECT kind, object_key, value FROM sandbox_objects WHERE system = ?"), system)
	if err != nil {
		return nil, fmt.Errorf("loading the sandbox objects of %s: %w", system, err)
	}
	defer rows.Close()
	out := map[string]map[string][]byte{}
	for rows.Next() {
		var kind, key, value string
		if err := rows.Scan(&kind, &key, &value); err != nil {
			return nil, fmt.Errorf("loading the sandbox objects of %s: %w", system, err)
		}
		if out[kind] == nil {
			out[kind] = map[string][]byte{}
		}
		out[kind][key] = []byte(value)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("loading the sandbox objects of %s: %w", system, err)
	}
	return out, nil
}

// Keys implements storage.SandboxObjects: the keys alone, from the primary key's index (an
// index-only scan where the visibility map allows).
func (o *SandboxObjects) Keys(ctx context.Context, system string, fn func(kind, key string)) error {
	rows, err := o.db.QueryContext(ctx, o.d.rebind("SELECT kind, object_key FROM sandbox_objects WHERE system = ?"), system)
	if err != nil {
		return fmt.Errorf("listing the sandbox keys of %s: %w", system, err)
	}
	defer rows.Close()
	var kind, key string
	for rows.Next() {
		if err := rows.Scan(&kind, &key); err != nil {
			return fmt.Errorf("listing the sandbox keys of %s: %w", system, err)
		}
		fn(kind, key)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("listing the sandbox keys of %s: %w", system, err)
	}
	return nil
}

// Get implements storage.SandboxObjects.
func (o *SandboxObjects) Get(ctx context.Context, system, kind, key string) ([]byte, error) {
	var value string
	err := o.queryRow(ctx, "sandbox_get", sandboxGetSQL, system, kind, key).Scan(&value)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading sandbox object %s %s of %s: %w", kind, key, system, err)
	}
	return []byte(value), nil
}

// Kind implements storage.SandboxObjects.
func (o *SandboxObjects) Kind(ctx context.Context, system, kind string) (map[string][]byte, error) {
	rows, err := o.db.QueryxContext(ctx, o.d.rebind("SELECT object_key, value FROM sandbox_objects WHERE system = ? AND kind = ?"), system, kind)
	if err != nil {
		return nil, fmt.Errorf("reading the sandbox objects %s of %s: %w", kind, system, err)
	}
	return o.scanKeys(rows, system, kind)
}

// Prefix implements storage.SandboxObjects. The keys are read as a byte-ordered range, which the
// primary key serves (PostgreSQL: its key column is byte-ordered since migration 0090, whatever the
// database's collation; SQLite: BINARY); a prefix whose range cannot be written (it ends in a byte
// above 0x7e, not ASCII) is compared with substr over the kind instead.
func (o *SandboxObjects) Prefix(ctx context.Context, system, kind, prefix string) (map[string][]byte, error) {
	var rows *sqlx.Rows
	var err error
	if end, ok := prefixEnd(prefix); ok {
		c := o.d.ByteOrder
		rows, err = o.db.QueryxContext(ctx, o.d.rebind("SELECT object_key, value FROM sandbox_objects WHERE system = ? AND kind = ? AND object_key"+c+" >= ?"+c+" AND object_key"+c+" < ?"+c),
			system, kind, prefix, end)
	} else {
		rows, err = o.db.QueryxContext(ctx, o.d.rebind("SELECT object_key, value FROM sandbox_objects WHERE system = ? AND kind = ? AND substr(object_key, 1, ?) = ?"),
			system, kind, utf8.RuneCountInString(prefix), prefix)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the sandbox objects %s %s* of %s: %w", kind, prefix, system, err)
	}
	return o.scanKeys(rows, system, kind)
}

// prefixEnd is the first string after every string that starts with prefix, in byte order: prefix
// with its last byte raised by one, when that byte is ASCII below 0x7f (the result stays UTF-8).
func prefixEnd(prefix string) (string, bool) {
	n := len(prefix)
	if n == 0 || prefix[n-1] >= 0x7f {
		return "", false
	}
	return prefix[:n-1] + string(prefix[n-1]+1), true
}

func (o *SandboxObjects) scanKeys(rows *sqlx.Rows, system, kind string) (map[string][]byte, error) {
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var key, value string
		if err := rows.Scan(&key, &value); err != nil {
			return nil, fmt.Errorf("reading the sandbox objects %s of %s: %w", kind, system, err)
		}
		out[key] = []byte(value)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the sandbox objects %s of %s: %w", kind, system, err)
	}
	return out, nil
}

// Write implements storage.SandboxObjects. Rows are written in (kind, key) order, so concurrent
// writers on PostgreSQL lock them in one order. A batch without deletes (a stand-in's usual one)
// is one upsert of every row (PostgreSQL: from arrays, together with the other systems' waiting
// writes, sandbox_batch.go; SQLite: a VALUES list per sandboxChunk rows) instead of one statement
// per row.
func (o *SandboxObjects) Write(ctx context.Context, system string, rows map[string]map[string][]byte) error {
	all, deletes := sortedSandboxRows(rows)
	switch {
	case len(all) == 0:
		return nil
	case deletes == 0 && o.writes != nil:
		if _, err := o.writes.submit(ctx, sandboxWrite{system: system, rows: all}); err != nil {
			return fmt.Errorf("writing %d sandbox object(s) of %s: %w", len(all), system, err)
		}
		return nil
	case deletes == 0 && len(all) <= sandboxChunk:
		if err := o.upsertValues(ctx, o.db, system, all); err != nil {
			return fmt.Errorf("writing %d sandbox object(s) of %s: %w", len(all), system, err)
		}
		return nil
	}
	tx, err := o.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("writing %d sandbox object(s) of %s: %w", len(all), system, err)
	}
	defer rollback(tx)
	upsert := o.d.rebind(`INSERT INTO sandbox_objects (system, kind, object_key, value) VALUES (?, ?, ?, ?)` + sandboxUpsert)
	del := o.d.rebind("DELETE FROM sandbox_objects WHERE system = ? AND kind = ? AND object_key = ?")
	for _, r := range all {
		if r.value == nil {
			_, err = tx.ExecContext(ctx, del, system, r.kind, r.key)
		} else {
			_, err = tx.ExecContext(ctx, upsert, system, r.kind, r.key, string(r.value))
		}
		if err != nil {
			return fmt.Errorf("writing sandbox object %s %s of %s: %w", r.kind, r.key, system, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("writing %d sandbox object(s) of %s: %w", len(all), system, err)
	}
	return nil
}

// sandboxUpsert writes a row only when its value changed: a stand-in rewrites every object a
// request touched, also one whose value came out the same.
const sandboxUpsert = ` ON CONFLICT (system, kind, object_key) DO UPDATE SET value = excluded.value
	WHERE sandbox_objects.value <> excluded.value`

// sandboxChunk bounds the rows of one VALUES upsert (4 parameters each: SQLite allows 32,766).
const sandboxChunk = 500

// upsertValues writes rows (no deletes) in one statement with a VALUES list.
func (o *SandboxObjects) upsertValues(ctx context.Context, db sqlx.ExecerContext, system string, rows []sandboxRow) error {
	ins := sq.StatementBuilder.PlaceholderFormat(o.d.Placeholder).
		Insert("sandbox_objects").Columns("system", "kind", "object_key", "value")
	for _, r := range rows {
		ins = ins.Values(system, r.kind, r.key, string(r.value))
	}
	q, args, err := ins.Suffix(sandboxUpsert).ToSql()
	if err != nil {
		return fmt.Errorf("building the sandbox upsert: %w", err)
	}
	_, err = db.ExecContext(ctx, q, args...)
	return err
}

type sandboxRow struct {
	kind, key string
	value     []byte // nil: delete
}

// sortedSandboxRows returns the rows in (kind, key) order and how many are deletes.
func sortedSandboxRows(rows map[string]map[string][]byte) ([]sandboxRow, int) {
	var all []sandboxRow
	deletes := 0
	for kind, keys := range rows {
		for key, v := range keys {
			all = append(all, sandboxRow{kind, key, v})
			if v == nil {
				deletes++
			}
		}
	}
	sort.Slice(all, func(i, j int) bool {
		return all[i].kind < all[j].kind || all[i].kind == all[j].kind && all[i].key < all[j].key
	})
	return all, deletes
}

// Clear implements storage.SandboxObjects.
func (o *SandboxObjects) Clear(ctx context.Context, system string) error {
	if _, err := o.db.ExecContext(ctx, o.d.rebind("DELETE FROM sandbox_objects WHERE system = ?"), system); err != nil {
		return fmt.Errorf("clearing the sandbox objects of %s: %w", system, err)
	}
	return nil
}
