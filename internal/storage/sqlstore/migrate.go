package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/sirupsen/logrus"
)

// Migration is one schema change, read from a file named NNNN_name.up.sql.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

var migrationFile = regexp.MustCompile(`^(\d+)_([A-Za-z0-9_\-]+)\.up\.sql$`)

// LoadMigrations reads the NNNN_name.up.sql files at the root of fsys, sorted by version.
func LoadMigrations(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("reading migrations: %w", err)
	}
	var out []Migration
	seen := map[int]string{}
	for _, e := range entries {
		m := migrationFile.FindStringSubmatch(e.Name())
		if e.IsDir() || m == nil {
			continue
		}
		v, err := strconv.Atoi(m[1])
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("reading migrations: bad version in %s", e.Name())
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("reading migrations: %s and %s have the same version", prev, e.Name())
		}
		seen[v] = e.Name()
		body, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("reading migration %s: %w", e.Name(), err)
		}
		out = append(out, Migration{Version: v, Name: m[2], SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Migrate applies the migrations in fsys that db has not seen yet, each in its own transaction,
// recording them in schema_migrations, and returns the resulting schema version. The dialect's
// migration lock (if any) is held throughout; applying to a current database is a no-op.
func Migrate(ctx context.Context, db *sqlx.DB, d Dialect, fsys fs.FS, log logrus.FieldLogger) (int, error) {
	return MigrateLine(ctx, db, d, fsys, Line{Table: "schema_migrations"}, log)
}

// Line is a migration line: the migrations of one component, recorded in a table of its own, so
// that components keeping tables in one database migrate them apart.
type Line struct {
	// Table records the applied versions.
	Table string
	// LockSQL / UnlockSQL, when set, replace the dialect's migration lock (a line of its own
	// takes a lock of its own).
	LockSQL, UnlockSQL string
}

// MigrateLine is Migrate for the migration line l.
func MigrateLine(ctx context.Context, db *sqlx.DB, d Dialect, fsys fs.FS, l Line, log logrus.FieldLogger) (int, error) {
	if l.LockSQL != "" {
		d.MigrationLockSQL, d.MigrationUnlockSQL = l.LockSQL, l.UnlockSQL
	}
	v, err := migrate(ctx, db, d, fsys, l.Table, log)
	if err != nil {
		return 0, fmt.Errorf("migrating %s database: %w", d.Name, err)
	}
	return v, nil
}

func migrate(ctx context.Context, db *sqlx.DB, d Dialect, fsys fs.FS, table string, log logrus.FieldLogger) (version int, err error) {
	migrations, err := LoadMigrations(fsys)
	if err != nil {
		return 0, err
	}
	conn, err := db.Connx(ctx)
	if err != nil {
		return 0, fmt.Errorf("getting a connection: %w", err)
	}
	defer conn.Close()
	if d.MigrationLockSQL != "" {
		if _, err := conn.ExecContext(ctx, d.MigrationLockSQL); err != nil {
			return 0, fmt.Errorf("taking the migration lock: %w", err)
		}
		defer func() {
			// The lock is per session: use a fresh context so a cancelled ctx still unlocks.
			uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, uerr := conn.ExecContext(uctx, d.MigrationUnlockSQL); uerr != nil {
				err = errors.Join(err, fmt.Errorf("releasing the migration lock: %w", uerr))
			}
		}()
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
		version INTEGER PRIMARY KEY,
		name TEXT NOT NULL,
		applied_at `+d.TimestampType+` NOT NULL)`); err != nil {
		return 0, fmt.Errorf("creating %s: %w", table, err)
	}
	for _, m := range migrations {
		applied, err := applyMigration(ctx, conn, d, table, m)
		if err != nil {
			return 0, fmt.Errorf("applying migration %04d_%s: %w", m.Version, m.Name, err)
		}
		if applied && log != nil {
			log.WithField("version", m.Version).WithField("name", m.Name).Infof("applied %s migration", d.Name)
		}
	}
	return schemaVersionIn(ctx, conn, table)
}

// applyMigration applies m in one transaction unless it is already recorded (checked inside the
// transaction, so concurrent migrators on SQLite, whose transactions take the write lock, do not
// apply it twice).
func applyMigration(ctx context.Context, conn *sqlx.Conn, d Dialect, table string, m Migration) (bool, error) {
	tx, err := conn.BeginTxx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer rollback(tx)
	var one int
	err = tx.GetContext(ctx, &one, d.rebind("SELECT 1 FROM "+table+" WHERE version = ?"), m.Version)
	switch {
	case err == nil:
		return false, nil
	case !errors.Is(err, sql.ErrNoRows):
		return false, err
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, d.rebind("INSERT INTO "+table+" (version, name, applied_at) VALUES (?, ?, ?)"),
		m.Version, m.Name, d.timeArg(time.Now())); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

// LatestVersion is the highest migration version in fsys (0 when there is none).
func LatestVersion(fsys fs.FS) (int, error) {
	ms, err := LoadMigrations(fsys)
	if err != nil || len(ms) == 0 {
		return 0, err
	}
	latest := 0
	for _, m := range ms {
		if m.Version > latest {
			latest = m.Version
		}
	}
	return latest, nil
}
