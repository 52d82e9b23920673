// Package migratetest holds what the tests of migration lines share: databases to migrate and a
// dump of the schema they end with.
package migratetest

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

// OpenSQLite opens a new SQLite database file of the test's with one connection.
func OpenSQLite(t testing.TB) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open("sqlite", filepath.Join(t.TempDir(), "keb.db"))
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// OpenPostgres opens a new database of the test PostgreSQL (pgtest).
func OpenPostgres(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("postgres", pgtest.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// SchemaDump describes what the migrations create, without the version tables: tables'
// columns, indexes, triggers, functions and storage options (PostgreSQL), sqlite_master's
// definitions (SQLite).
func SchemaDump(t testing.TB, db *sql.DB, dialect string) []string {
	t.Helper()
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
