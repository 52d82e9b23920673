// Package durablesql keeps the stand-ins' state (a durable.Store) in an SQL database, in the
// sandbox_objects table, which it migrates with a migration line of its own (table
// sandbox_schema_migrations): the broker's database, sharing its connections, or a SQLite file of
// the sandbox's own (cmd/sandbox).
package durablesql

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"sync"
	"time"
	"unicode/utf8"

	sq "github.com/Masterminds/squirrel"
	"github.com/jmoiron/sqlx"
	"github.com/sirupsen/logrus"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver/sqlite"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/sqlstore"
)

//go:embed migrations
var migrationFiles embed.FS

// VersionTable records the sandbox's migration line.
const VersionTable = "sandbox_schema_migrations"

// Migrations are the migrations of the driver ("postgres" or "sqlite").
func Migrations(driver string) (fs.FS, error) {
	sub, err := fs.Sub(migrationFiles, "migrations/"+driver)
	if err != nil {
		return nil, fmt.Errorf("sandbox migrations of %s: %w", driver, err)
	}
	if _, err := fs.Stat(sub, "."); err != nil {
		return nil, fmt.Errorf("no sandbox migrations for the %q driver", driver)
	}
	return sub, nil
}

// dialect is what the objects' statements and migrations need of the driver.
func dialect(driver string) (sqlstore.Dialect, error) {
	switch driver {
	case "postgres":
		return sqlstore.Dialect{Name: driver, Placeholder: sq.Dollar, BindType: sqlx.DOLLAR, TimestampType: "TIMESTAMPTZ",
			ByteOrder: ` COLLATE "C"`}, nil
	case "sqlite":
		return sqlstore.Dialect{Name: driver, Placeholder: sq.Question, BindType: sqlx.QUESTION, TimeAsMicros: true, TimestampType: "INTEGER"}, nil
	default:
		return sqlstore.Dialect{}, fmt.Errorf("the sandbox keeps no objects in a %q database", driver)
	}
}

// Migrate applies the sandbox's migrations to db and returns its version in the sandbox's line.
func Migrate(ctx context.Context, db *sqlx.DB, driver string, log logrus.FieldLogger) (int, error) {
	d, err := dialect(driver)
	if err != nil {
		return 0, err
	}
	fsys, err := Migrations(driver)
	if err != nil {
		return 0, err
	}
	v, err := sqlstore.MigrateLine(ctx, db, d, fsys, sqlstore.Line{Table: VersionTable}, log)
	if err != nil {
		return 0, fmt.Errorf("migrating the sandbox's tables: %w", err)
	}
	return v, nil
}

// Objects implements durable.Store on the sandbox_objects table.
type Objects struct {
	// owned is the database OpenFile opened.
	owned *sqlx.DB
	db    *sqlx.DB
	d     sqlstore.Dialect
	// stmts are the statements prepared once on db: a stand-in reads and writes on every request,
	// and lib/pq would otherwise parse and describe each in a round trip of its own first.
	stmts *stmts
	// writes, when set (PostgreSQL), coalesces the systems' upserts (batch.go) onto the unflushed
	// sessions.
	writes *groupWriter
	log    logrus.FieldLogger
	// claimCheck is how often a held claim's connection is checked (claim.go).
	claimCheck time.Duration
}

var (
	_ durable.Store     = (*Objects)(nil)
	_ durable.KeyLister = (*Objects)(nil)
)

// Open migrates the sandbox's tables in the store's database and returns the objects in it,
// written on the store's connections. Close stops their writer.
func Open(ctx context.Context, db storage.Database, log logrus.FieldLogger) (*Objects, error) {
	if _, err := Migrate(ctx, db.Writer, db.Driver, log); err != nil {
		return nil, err
	}
	d, err := dialect(db.Driver)
	if err != nil {
		return nil, err
	}
	if log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		log = l
	}
	o := &Objects{db: db.Writer, d: d, stmts: &stmts{db: db.Writer, m: map[string]*sqlx.Stmt{}}, log: log, claimCheck: defaultClaimCheck}
	if db.Driver == "postgres" {
		unflushed := db.Unflushed
		if unflushed == nil {
			unflushed = db.Writer
		}
		o.startWriter(&stmts{db: unflushed, m: map[string]*sqlx.Stmt{}})
	}
	return o, nil
}

// OpenFile opens (creating if needed) a SQLite database file of the sandbox's own (cmd/sandbox),
// applies the migrations and returns the objects in it; Close closes the file.
func OpenFile(ctx context.Context, path string, log logrus.FieldLogger) (*Objects, error) {
	w, err := sqlite.OpenWriter(ctx, path)
	if err != nil {
		return nil, err
	}
	o, err := Open(ctx, storage.Database{Driver: "sqlite", Writer: w, Unflushed: w}, log)
	if err != nil {
		_ = w.Close()
		return nil, err
	}
	o.owned = w
	return o, nil
}

// Close stops the writer and releases the prepared statements (and closes the database when
// OpenFile opened it).
func (o *Objects) Close() error {
	o.stopWriter()
	errs := []error{o.stmts.close()}
	if o.writes != nil {
		errs = append(errs, o.writes.stmts.close())
	}
	if o.owned != nil {
		errs = append(errs, o.owned.Close())
	}
	return errors.Join(errs...)
}

// stmts are statements prepared once each on db, by name.
type stmts struct {
	db *sqlx.DB
	mu sync.Mutex
	m  map[string]*sqlx.Stmt
}

func (c *stmts) get(ctx context.Context, key, query string) (*sqlx.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[key]; ok {
		return st, nil
	}
	st, err := c.db.PreparexContext(ctx, c.db.Rebind(query))
	if err != nil {
		return nil, err
	}
	c.m[key] = st
	return st, nil
}

func (c *stmts) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for k, st := range c.m {
		errs = append(errs, st.Close())
		delete(c.m, k)
	}
	return errors.Join(errs...)
}

// sandboxGetSQL is the point read, run on nearly every stand-in request.
const sandboxGetSQL = "SELECT value FROM sandbox_objects WHERE system = ? AND kind = ? AND object_key = ?"

// queryRow runs query, prepared once.
func (o *Objects) queryRow(ctx context.Context, key, query string, args ...any) *sqlx.Row {
	if st, err := o.stmts.get(ctx, key, query); err == nil {
		return st.QueryRowxContext(ctx, args...)
	}
	return o.db.QueryRowxContext(ctx, o.db.Rebind(query), args...)
}

// Load implements durable.Store.
func (o *Objects) Load(ctx context.Context, system string) (map[string]map[string][]byte, error) {
	rows, err := o.db.QueryxContext(ctx, o.db.Rebind("SELECT kind, object_key, value FROM sandbox_objects WHERE system = ?"), system)
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

// Keys implements durable.Store: the keys alone, from the primary key's index (an
// index-only scan where the visibility map allows).
func (o *Objects) Keys(ctx context.Context, system string, fn func(kind, key string)) error {
	rows, err := o.db.QueryContext(ctx, o.db.Rebind("SELECT kind, object_key FROM sandbox_objects WHERE system = ?"), system)
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

// Get implements durable.Store.
func (o *Objects) Get(ctx context.Context, system, kind, key string) ([]byte, error) {
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

// Kind implements durable.Store.
func (o *Objects) Kind(ctx context.Context, system, kind string) (map[string][]byte, error) {
	rows, err := o.db.QueryxContext(ctx, o.db.Rebind("SELECT object_key, value FROM sandbox_objects WHERE system = ? AND kind = ?"), system, kind)
	if err != nil {
		return nil, fmt.Errorf("reading the sandbox objects %s of %s: %w", kind, system, err)
	}
	return o.scanKeys(rows, system, kind)
}

// Prefix implements durable.Store. The keys are read as a byte-ordered range, which the
// primary key serves (PostgreSQL: its key column is byte-ordered (the sandbox's migration 0001), whatever the
// database's collation; SQLite: BINARY); a prefix whose range cannot be written (it ends in a byte
// above 0x7e, not ASCII) is compared with substr over the kind instead.
func (o *Objects) Prefix(ctx context.Context, system, kind, prefix string) (map[string][]byte, error) {
	var rows *sqlx.Rows
	var err error
	if end, ok := prefixEnd(prefix); ok {
		c := o.d.ByteOrder
		rows, err = o.db.QueryxContext(ctx, o.db.Rebind("SELECT object_key, value FROM sandbox_objects WHERE system = ? AND kind = ? AND object_key"+c+" >= ?"+c+" AND object_key"+c+" < ?"+c),
			system, kind, prefix, end)
	} else {
		rows, err = o.db.QueryxContext(ctx, o.db.Rebind("SELECT object_key, value FROM sandbox_objects WHERE system = ? AND kind = ? AND substr(object_key, 1, ?) = ?"),
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

func (o *Objects) scanKeys(rows *sqlx.Rows, system, kind string) (map[string][]byte, error) {
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

// Write implements durable.Store. Rows are written in (kind, key) order, so concurrent
// writers on PostgreSQL lock them in one order. A batch without deletes (a stand-in's usual one)
// is one upsert of every row (PostgreSQL: from arrays, together with the other systems' waiting
// writes, sandbox_batch.go; SQLite: a VALUES list per sandboxChunk rows) instead of one statement
// per row.
func (o *Objects) Write(ctx context.Context, system string, rows map[string]map[string][]byte) error {
	all, deletes := sortedSandboxRows(rows)
	switch {
	case len(all) == 0:
		return nil
	case deletes == 0 && o.writes != nil:
		if err := o.writes.submit(ctx, sandboxWrite{system: system, rows: all}); err != nil {
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
	defer func() { _ = tx.Rollback() }()
	upsert := o.db.Rebind(`INSERT INTO sandbox_objects (system, kind, object_key, value) VALUES (?, ?, ?, ?)` + sandboxUpsert)
	del := o.db.Rebind("DELETE FROM sandbox_objects WHERE system = ? AND kind = ? AND object_key = ?")
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
func (o *Objects) upsertValues(ctx context.Context, db sqlx.ExecerContext, system string, rows []sandboxRow) error {
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

// Clear implements durable.Store.
func (o *Objects) Clear(ctx context.Context, system string) error {
	if _, err := o.db.ExecContext(ctx, o.db.Rebind("DELETE FROM sandbox_objects WHERE system = ?"), system); err != nil {
		return fmt.Errorf("clearing the sandbox objects of %s: %w", system, err)
	}
	return nil
}
