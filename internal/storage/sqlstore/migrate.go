package sqlstore

import (
	"context"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"

	"github.com/jmoiron/sqlx"
	"github.com/sirupsen/logrus"

	"github.com/kyma-project/kyma-environment-broker/internal/storage/migrate"
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

// Migrate applies the migrations in fsys that db has not seen yet (golang-migrate, see package
// migrate: under the dialect's lock, recorded in schema_migrations) and returns the resulting
// schema version; applying to a current database is a no-op.
func Migrate(ctx context.Context, db *sqlx.DB, d Dialect, fsys fs.FS, log logrus.FieldLogger) (int, error) {
	return MigrateLine(ctx, db, d, fsys, Line{Table: "schema_migrations"}, log)
}

// Line is a migration line: the migrations of one component, recorded in a table of its own, so
// that components keeping tables in one database migrate them apart.
type Line struct {
	// Table records the line's version.
	Table string
}

// MigrateLine is Migrate for the migration line l.
func MigrateLine(ctx context.Context, db *sqlx.DB, d Dialect, fsys fs.FS, l Line, log logrus.FieldLogger) (int, error) {
	v, err := migrate.Up(ctx, db.DB, d.Name, migrate.Line{Table: l.Table, Migrations: fsys})
	if err != nil {
		return 0, fmt.Errorf("migrating %s database (%s): %w", d.Name, l.Table, err)
	}
	if log != nil {
		log.WithField("version", v).WithField("table", l.Table).Debugf("%s database migrated", d.Name)
	}
	return v, nil
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
