package migratecmd_test

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durablesql"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver/postgres"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver/sqlite"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/migrate"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/migrate/migratetest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// lines are the migration lines of a dialect as the broker runs them in one database: the
// product's and the embedded sandbox's (broker migrate --line).
func lines(t *testing.T, dialect string) []migrate.Line {
	product := sqlite.Migrations()
	if dialect == "postgres" {
		product = postgres.Migrations()
	}
	sandbox, err := durablesql.Migrations(dialect)
	require.NoError(t, err)
	return []migrate.Line{{Table: "schema_migrations", Migrations: product}, {Table: durablesql.VersionTable, Migrations: sandbox}}
}

func migrationCount(t *testing.T, fsys fs.FS) int {
	entries, err := fs.ReadDir(fsys, ".")
	require.NoError(t, err)
	ups, downs := 0, 0
	for _, e := range entries {
		switch {
		case strings.HasSuffix(e.Name(), ".up.sql"):
			ups++
			_, err := fs.Stat(fsys, strings.TrimSuffix(e.Name(), ".up.sql")+".down.sql")
			assert.NoError(t, err, "%s has no down migration", e.Name())
		case strings.HasSuffix(e.Name(), ".down.sql"):
			downs++
		}
	}
	assert.Equal(t, ups, downs, "every up migration has its down migration")
	return ups
}

// TestRoundTrip: every line of each dialect goes up to its latest version, down to 0 (leaving
// no table, index or trigger of its own) and up again, ending with the schema it had.
func TestRoundTrip(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var db *sql.DB
			if dialect == "postgres" {
				var err error
				db, err = sql.Open("postgres", pgtest.NewDatabase(t))
				require.NoError(t, err)
				t.Cleanup(func() { _ = db.Close() })
			} else {
				db = migratetest.OpenSQLite(t).DB
			}
			empty := migratetest.SchemaDump(t, db, dialect)
			up := func() {
				for _, l := range lines(t, dialect) {
					_, err := migrate.Up(ctx, db, dialect, l)
					require.NoError(t, err, l.Table)
				}
			}
			up()
			latest := migratetest.SchemaDump(t, db, dialect)
			require.NotEmpty(t, latest)
			ls := lines(t, dialect)
			for i := len(ls) - 1; i >= 0; i-- {
				n := migrationCount(t, ls[i].Migrations)
				m, err := migrate.Open(ctx, db, dialect, ls[i])
				require.NoError(t, err)
				v, err := m.Down(n)
				require.NoError(t, err, ls[i].Table)
				assert.Equal(t, uint(0), v)
				_, err = m.Down(1)
				assert.ErrorContains(t, err, "only 0 migration(s) applied", "below 0 is refused")
				require.NoError(t, m.Close())
			}
			assert.Equal(t, empty, migratetest.SchemaDump(t, db, dialect), "down to 0 leaves the schema it started from")
			up()
			assert.Equal(t, fmt.Sprint(latest), fmt.Sprint(migratetest.SchemaDump(t, db, dialect)), "the schema after the round trip")
		})
	}
}

// TestEachDownUndoesItsUp: going down one migration at a time, the product line's schema at
// each version is the one it had when going up to that version (a down that leaves something a
// later down or up hides is caught here, not by the round trip to 0).
func TestEachDownUndoesItsUp(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var db *sql.DB
			if dialect == "postgres" {
				db = migratetest.OpenPostgres(t)
			} else {
				db = migratetest.OpenSQLite(t).DB
			}
			m, err := migrate.Open(ctx, db, dialect, lines(t, dialect)[0])
			require.NoError(t, err)
			defer m.Close()
			dumps := map[uint][]string{0: migratetest.SchemaDump(t, db, dialect)}
			var versions []uint
			for {
				v, ok, err := m.Next()
				require.NoError(t, err)
				if !ok {
					break
				}
				versions = append(versions, v)
				dumps[v] = migratetest.SchemaDump(t, db, dialect)
			}
			require.Equal(t, migrationCount(t, lines(t, dialect)[0].Migrations), len(versions))
			for i := len(versions) - 1; i >= 0; i-- {
				want := uint(0)
				if i > 0 {
					want = versions[i-1]
				}
				v, err := m.Down(1)
				require.NoError(t, err)
				require.Equal(t, want, v)
				assert.Equal(t, dumps[want], migratetest.SchemaDump(t, db, dialect), "down from %d", versions[i])
			}
		})
	}
}
