package migrate_test

import (
	"context"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/kyma-project/kyma-environment-broker/internal/storage/migrate"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/migrate/migratetest"
)

// formerRunnerTable is the version table the runner before golang-migrate kept: one row per
// applied migration (its layout as internal/storage/sqlstore/migrate.go created it on SQLite).
const formerRunnerTable = `CREATE TABLE schema_migrations (
	version INTEGER PRIMARY KEY,
	name TEXT NOT NULL,
	applied_at INTEGER NOT NULL)`

var line = fstest.MapFS{
	"0001_a.up.sql":   {Data: []byte("CREATE TABLE a (id INTEGER PRIMARY KEY);")},
	"0001_a.down.sql": {Data: []byte("DROP TABLE a;")},
	"0002_b.up.sql":   {Data: []byte("CREATE TABLE b (id INTEGER PRIMARY KEY);")},
	"0002_b.down.sql": {Data: []byte("DROP TABLE b;")},
}

// TestAdoptsTheFormerRunner: a database the former runner migrated to version 1 is adopted at
// version 1 (0001 is not run again: it would fail, a exists) and migrates on from there.
func TestAdoptsTheFormerRunner(t *testing.T) {
	ctx := context.Background()
	db := migratetest.OpenSQLite(t)
	for _, q := range []string{formerRunnerTable, "CREATE TABLE a (id INTEGER PRIMARY KEY)",
		"INSERT INTO schema_migrations VALUES (1, 'a', 0)"} {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	v, err := migrate.Up(ctx, db.DB, "sqlite", migrate.Line{Table: "schema_migrations", Migrations: line})
	require.NoError(t, err)
	assert.Equal(t, 2, v)
	var kept int
	require.NoError(t, db.GetContext(ctx, &kept, "SELECT count(*) FROM schema_migrations_runner"))
	assert.Equal(t, 1, kept, "the former rows are kept aside")
	var max int
	require.NoError(t, db.GetContext(ctx, &max, "SELECT MAX(version) FROM schema_migrations"))
	assert.Equal(t, 2, max, "the schema version reads as before")
}

// TestUpDownForce: down undoes a migration, a failed one leaves the line dirty until forced.
func TestUpDownForce(t *testing.T) {
	ctx := context.Background()
	db := migratetest.OpenSQLite(t)
	m, err := migrate.Open(ctx, db.DB, "sqlite", migrate.Line{Table: "schema_migrations", Migrations: line})
	require.NoError(t, err)
	defer m.Close()
	v, err := m.Up()
	require.NoError(t, err)
	assert.Equal(t, uint(2), v)
	v, err = m.Down(1)
	require.NoError(t, err)
	assert.Equal(t, uint(1), v)
	_, err = db.ExecContext(ctx, "CREATE TABLE b (id INTEGER)") // 0002 will fail
	require.NoError(t, err)
	_, err = m.Up()
	require.Error(t, err)
	v, dirty, err := m.Version()
	require.NoError(t, err)
	assert.True(t, dirty)
	assert.Equal(t, uint(2), v)
	require.NoError(t, m.Force(2))
	v, dirty, err = m.Version()
	require.NoError(t, err)
	assert.False(t, dirty)
	assert.Equal(t, uint(2), v)
}
