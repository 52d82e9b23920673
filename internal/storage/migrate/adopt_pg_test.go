package migrate_test

import (
	"context"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver/postgres"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/migrate"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/migrate/migratetest"
)

// TestAdoptsTheFormerRunnerPostgres: a PostgreSQL database the former runner migrated (its
// version table as internal/storage/sqlstore/migrate.go created it, one row per migration) to
// 0095 is adopted at 0095 (nothing before is run again: 0001 would fail, its tables exist) and
// migrates on to the latest version, ending with the schema a fresh database gets.
func TestAdoptsTheFormerRunnerPostgres(t *testing.T) {
	ctx := context.Background()
	const adoptedAt = 95
	db := migratetest.OpenPostgres(t)
	_, err := db.ExecContext(ctx, `CREATE TABLE schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL)`)
	require.NoError(t, err)
	fsys := postgres.Migrations()
	names, err := fs.Glob(fsys, "*.up.sql")
	require.NoError(t, err)
	sort.Strings(names)
	file := regexp.MustCompile(`^([0-9]+)_(.*)\.up\.sql$`)
	// The latest version: the last migration's.
	latest, err := strconv.Atoi(file.FindStringSubmatch(names[len(names)-1])[1])
	require.NoError(t, err)
	former := 0
	for _, name := range names {
		m := file.FindStringSubmatch(name)
		require.NotNil(t, m, name)
		v, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		if v > adoptedAt {
			continue
		}
		body, err := fs.ReadFile(fsys, name)
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, string(body))
		require.NoError(t, err, name)
		_, err = db.ExecContext(ctx, `INSERT INTO schema_migrations VALUES ($1, $2, $3)`, v, m[2], time.Now())
		require.NoError(t, err)
		former++
	}

	v, err := migrate.Up(ctx, db, "postgres", migrate.Line{Table: "schema_migrations", Migrations: fsys})
	require.NoError(t, err)
	assert.Equal(t, latest, v)
	var kept int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT count(*) FROM schema_migrations_runner").Scan(&kept))
	assert.Equal(t, former, kept, "the former rows are kept aside")
	var version int
	var dirty bool
	require.NoError(t, db.QueryRowContext(ctx, "SELECT version, dirty FROM schema_migrations").Scan(&version, &dirty))
	assert.Equal(t, latest, version)
	assert.False(t, dirty)

	fresh := migratetest.OpenPostgres(t)
	_, err = migrate.Up(ctx, fresh, "postgres", migrate.Line{Table: "schema_migrations", Migrations: fsys})
	require.NoError(t, err)
	assert.Equal(t, migratetest.SchemaDump(t, fresh, "postgres"), migratetest.SchemaDump(t, db, "postgres"), "the adopted database's schema is a fresh one's")

	// Adopting again (another replica, a restart) changes nothing.
	v, err = migrate.Up(ctx, db, "postgres", migrate.Line{Table: "schema_migrations", Migrations: fsys})
	require.NoError(t, err)
	assert.Equal(t, latest, v)
}
