package migrate_test

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
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// lines are the migration lines of a dialect: the product's and the sandbox's (one database).
func lines(t *testing.T, dialect string) []migrate.Line {
	product := sqlite.Migrations()
	if dialect == "postgres" {
		product = postgres.Migrations()
	}
	sandbox, err := durablesql.Migrations(dialect)
	require.NoError(t, err)
	return []migrate.Line{{Table: "schema_migrations", Migrations: product}, {Table: durablesql.VersionTable, Migrations: sandbox}}
}

// schemaDump describes what the migrations create, without the version tables: tables'
// columns, indexes, triggers, functions and storage options (PostgreSQL), sqlite_master's
// definitions (SQLite).
func schemaDump(t *testing.T, db *sql.DB, dialect string) []string {
	queries := []string{`SELECT type || ' ' || name || ' ' || COALESCE(sql, '') FROM sqlite_master
		WHERE name NOT LIKE '%schema_migrations%' AND name <> 'version_unique'
		AND name NOT LIKE 'sqlite_%' ORDER BY type, name`} // sqlite_sequence is SQLite's own
	if dialect == "postgres" {
		queries = []string{
			`SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || COALESCE(column_default, '')
			   FROM information_schema.columns WHERE table_schema = current_schema() AND table_name NOT LIKE '%schema_migrations%'
			   ORDER BY table_name, column_name`,
			`SELECT indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname = current_schema()
			   AND tablename NOT LIKE '%schema_migrations%' ORDER BY indexname`,
			`SELECT trigger_name || ' ' || event_manipulation || ' ' || COALESCE(action_condition, '') || ' ' || action_statement
			   FROM information_schema.triggers WHERE trigger_schema = current_schema() ORDER BY trigger_name, event_manipulation`,
			`SELECT p.proname || ' ' || p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
			   WHERE n.nspname = current_schema() ORDER BY p.proname`,
			`SELECT c.relname || ' ' || COALESCE(array_to_string(c.reloptions, ','), '') FROM pg_class c
			   JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'
			   AND c.relname NOT LIKE '%schema_migrations%' ORDER BY c.relname`,
		}
	}
	var out []string
	for _, q := range queries {
		rows, err := db.Query(q)
		require.NoError(t, err)
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			out = append(out, s)
		}
		require.NoError(t, rows.Err())
		require.NoError(t, rows.Close())
	}
	return out
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
				db = openSQLite(t).DB
			}
			empty := schemaDump(t, db, dialect)
			up := func() {
				for _, l := range lines(t, dialect) {
					_, err := migrate.Up(ctx, db, dialect, l)
					require.NoError(t, err, l.Table)
				}
			}
			up()
			latest := schemaDump(t, db, dialect)
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
			assert.Equal(t, empty, schemaDump(t, db, dialect), "down to 0 leaves the schema it started from")
			up()
			assert.Equal(t, fmt.Sprint(latest), fmt.Sprint(schemaDump(t, db, dialect)), "the schema after the round trip")
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
				db = openPostgres(t)
			} else {
				db = openSQLite(t).DB
			}
			m, err := migrate.Open(ctx, db, dialect, lines(t, dialect)[0])
			require.NoError(t, err)
			defer m.Close()
			dumps := map[uint][]string{0: schemaDump(t, db, dialect)}
			var versions []uint
			for {
				v, ok, err := m.Next()
				require.NoError(t, err)
				if !ok {
					break
				}
				versions = append(versions, v)
				dumps[v] = schemaDump(t, db, dialect)
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
				assert.Equal(t, dumps[want], schemaDump(t, db, dialect), "down from %d", versions[i])
			}
		})
	}
}
