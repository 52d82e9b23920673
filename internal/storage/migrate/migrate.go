// Package migrate applies a migration line (embedded NNNN_name.up.sql / .down.sql files) to a
// PostgreSQL or SQLite database with golang-migrate: one replica migrates at a time (its advisory
// lock on PostgreSQL; SQLite has one writer), a migration that fails leaves the line dirty at its
// version until an operator forces it (Force), and every migration can be undone (Down).
//
// A database migrated by the runner this package replaced has a version table of that runner's
// layout (version, name, applied_at): it is adopted, its highest version recorded in
// golang-migrate's layout, without running anything again.
package migrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	"github.com/golang-migrate/migrate/v4/database/postgres"
	"github.com/golang-migrate/migrate/v4/database/sqlite"
	"github.com/golang-migrate/migrate/v4/source/iofs"
)

// Line is a migration line: one component's migrations, recorded in a version table of its own.
type Line struct {
	// Table records the line's version.
	Table string
	// Migrations holds the NNNN_name.up.sql and NNNN_name.down.sql files at its root.
	Migrations fs.FS
}

// Migrator migrates one line of one database.
type Migrator struct {
	fsys fs.FS
	m    *migrate.Migrate
	src  interface{ Close() error }
	conn *sql.Conn
}

// Open adopts a version table of the former runner, if there is one, and returns the line's
// migrator on db ("postgres" or "sqlite"); Close releases it (db stays open).
func Open(ctx context.Context, db *sql.DB, driver string, l Line) (*Migrator, error) {
	if err := adopt(ctx, db, driver, l.Table); err != nil {
		return nil, fmt.Errorf("adopting the version table %s: %w", l.Table, err)
	}
	src, err := iofs.New(l.Migrations, ".")
	if err != nil {
		return nil, fmt.Errorf("reading the migrations: %w", err)
	}
	out := &Migrator{src: src, fsys: l.Migrations}
	var drv database.Driver
	switch driver {
	case "postgres":
		// On a connection of its own: the advisory lock is the session's, and the driver's
		// Close closes what it was given (the connection, not the pool).
		if out.conn, err = db.Conn(ctx); err == nil {
			drv, err = postgres.WithConnection(ctx, out.conn, &postgres.Config{MigrationsTable: l.Table})
		}
	case "sqlite":
		drv, err = sqlite.WithInstance(db, &sqlite.Config{MigrationsTable: l.Table})
	default:
		err = fmt.Errorf("no migrations for the %q driver", driver)
	}
	if err != nil {
		_ = src.Close()
		if out.conn != nil {
			_ = out.conn.Close()
		}
		return nil, fmt.Errorf("opening the %s migration driver: %w", driver, err)
	}
	if out.m, err = migrate.NewWithInstance("iofs", src, driver, drv); err != nil {
		_ = src.Close()
		return nil, fmt.Errorf("preparing the migrations: %w", err)
	}
	return out, nil
}

// OpenOwned is Open on a database opened for the migrator alone: closeFn releases the migrator
// and then the database, and a failure to open closes the database at once.
func OpenOwned(ctx context.Context, db *sql.DB, driver string, l Line) (m *Migrator, closeFn func() error, err error) {
	m, err = Open(ctx, db, driver, l)
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return m, func() error { return errors.Join(m.Close(), db.Close()) }, nil
}

// Close releases the migrator. The SQLite driver's own Close would close the database it was
// given, so only the source and the PostgreSQL connection are closed.
func (m *Migrator) Close() error {
	errs := []error{m.src.Close()}
	if m.conn != nil {
		errs = append(errs, m.conn.Close())
	}
	return errors.Join(errs...)
}

// Up applies every migration not applied yet and returns the resulting version.
func (m *Migrator) Up() (uint, error) {
	if err := m.m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return 0, fmt.Errorf("migrating up: %w", err)
	}
	v, _, err := m.Version()
	return v, err
}

// Next applies the next migration not applied yet and returns the resulting version; ok is false
// when every migration is applied.
func (m *Migrator) Next() (v uint, ok bool, err error) {
	if err := m.m.Steps(1); err != nil {
		if errors.Is(err, migrate.ErrNoChange) || errors.Is(err, fs.ErrNotExist) {
			v, _, err = m.Version()
			return v, false, err
		}
		return 0, false, fmt.Errorf("migrating up one step: %w", err)
	}
	v, _, err = m.Version()
	return v, err == nil, err
}

// Down undoes the last steps migrations (at least one) and returns the resulting version. It
// refuses, undoing nothing, when fewer than steps migrations are applied.
func (m *Migrator) Down(steps int) (uint, error) {
	if steps < 1 {
		steps = 1
	}
	v, dirty, err := m.Version()
	if err != nil {
		return 0, err
	}
	if dirty {
		return 0, fmt.Errorf("migrating down: version %d is dirty (a migration failed): repair it and force a version first", v)
	}
	applied, err := m.applied(v)
	if err != nil {
		return 0, err
	}
	if steps > applied {
		return 0, fmt.Errorf("migrating down %d step(s): only %d migration(s) applied (version %d), nothing undone", steps, applied, v)
	}
	if err := m.m.Steps(-steps); err != nil {
		return 0, fmt.Errorf("migrating down %d step(s): %w", steps, err)
	}
	v, _, err = m.Version()
	return v, err
}

// applied counts the line's migrations up to version (those a database at version has applied).
func (m *Migrator) applied(version uint) (int, error) {
	entries, err := fs.ReadDir(m.fsys, ".")
	if err != nil {
		return 0, fmt.Errorf("reading the migrations: %w", err)
	}
	n := 0
	for _, e := range entries {
		match := upFile.FindStringSubmatch(e.Name())
		if match == nil {
			continue
		}
		if v, err := strconv.ParseUint(match[1], 10, 64); err == nil && uint(v) <= version {
			n++
		}
	}
	return n, nil
}

var upFile = regexp.MustCompile(`^([0-9]+)_.*\.up\.sql$`)

// Version is the line's version (0 when nothing is applied) and whether a migration failed at it.
func (m *Migrator) Version() (uint, bool, error) {
	v, dirty, err := m.m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading the version: %w", err)
	}
	return v, dirty, nil
}

// Force records version as applied and clean without running anything: after a failed migration
// an operator has repaired by hand.
func (m *Migrator) Force(version int) error {
	if err := m.m.Force(version); err != nil {
		return fmt.Errorf("forcing version %d: %w", version, err)
	}
	return nil
}

// Up applies the line's migrations to db and returns its version.
func Up(ctx context.Context, db *sql.DB, driver string, l Line) (int, error) {
	m, err := Open(ctx, db, driver, l)
	if err != nil {
		return 0, err
	}
	defer m.Close()
	v, err := m.Up()
	return int(v), err
}

// adoptLockID serialises the adoption of a former version table across replicas (PostgreSQL).
const adoptLockID = 7_351_009_213

// adopt converts a version table of the former runner (version, name, applied_at: one row per
// migration) into golang-migrate's (version, dirty: one row), keeping the former rows in
// <table>_runner. Nothing is converted when the table is absent or already converted.
func adopt(ctx context.Context, db *sql.DB, driver, table string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var former int
	switch driver {
	case "postgres":
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", adoptLockID)); err != nil {
			return err
		}
		err = tx.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = $1 AND column_name = 'name'`, table).Scan(&former)
	case "sqlite":
		err = tx.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info(?) WHERE name = 'name'`, table).Scan(&former)
	default:
		return fmt.Errorf("no migrations for the %q driver", driver)
	}
	if err != nil || former == 0 {
		return err
	}
	create := `CREATE TABLE ` + table + ` (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL)`
	if driver == "sqlite" {
		// golang-migrate's sqlite layout.
		create = `CREATE TABLE ` + table + ` (version uint64, dirty bool); CREATE UNIQUE INDEX IF NOT EXISTS version_unique ON ` + table + ` (version)`
	}
	for _, q := range []string{
		`CREATE TABLE ` + table + `_runner AS SELECT * FROM ` + table,
		`DROP TABLE ` + table,
		create,
		`INSERT INTO ` + table + ` (version, dirty) SELECT MAX(version), false FROM ` + table + `_runner HAVING MAX(version) IS NOT NULL`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return tx.Commit()
}
