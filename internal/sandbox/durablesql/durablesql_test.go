package durablesql

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver/postgres"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver/sqlite"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/storagetest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// env opens the objects in one database, each time on a broker store of its own (as the broker
// does: the objects share the store's connections).
type env struct {
	open func(t *testing.T) *Objects
}

type newEnv func(t *testing.T) *env

func sqliteEnv(t *testing.T) *env {
	path := filepath.Join(t.TempDir(), "keb.db")
	key := storagetest.Key(t)
	return &env{open: func(t *testing.T) *Objects {
		s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path}, storagetest.Keyring(t, key), nil)
		require.NoError(t, err)
		return openOn(t, s)
	}}
}

func postgresEnv(t *testing.T) *env {
	url := pgtest.NewDatabase(t)
	key := storagetest.Key(t)
	return &env{open: func(t *testing.T) *Objects {
		s, err := postgres.Open(context.Background(), postgres.Config{URL: url, MaxOpenConns: 10}, storagetest.Keyring(t, key), nil)
		require.NoError(t, err)
		return openOn(t, s)
	}}
}

func openOn(t *testing.T, s storage.Store) *Objects {
	t.Helper()
	o, err := Open(context.Background(), s.Database(), nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, o.Close())
		assert.NoError(t, s.Close())
	})
	return o
}

func TestObjects(t *testing.T) {
	for name, newEnv := range map[string]newEnv{"sqlite": sqliteEnv, "postgres": postgresEnv} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for test, fn := range map[string]func(*testing.T, *env){
				"SandboxObjects":                testSandboxObjects,
				"SandboxObjectsConcurrent":      testSandboxObjectsConcurrent,
				"SandboxObjectsSystemsTogether": testSandboxObjectsSystemsTogether,
			} {
				t.Run(test, func(t *testing.T) {
					t.Parallel()
					fn(t, newEnv(t))
				})
			}
		})
	}
}

// TestOpenFile: the sandbox's own database file keeps the objects across opens.
func TestOpenFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sandbox.db")
	o, err := OpenFile(ctx, path, nil)
	require.NoError(t, err)
	require.NoError(t, o.Write(ctx, "ias", rows{"sp": {"a": []byte(`{}`)}}))
	require.NoError(t, o.Close())
	o, err = OpenFile(ctx, path, nil)
	require.NoError(t, err)
	defer o.Close()
	got, err := o.Load(ctx, "ias")
	require.NoError(t, err)
	assert.Equal(t, rows{"sp": {"a": []byte(`{}`)}}, got)
}

// TestAdoptsTheBrokersTable: a database whose sandbox_objects table the broker's own migrations
// created (before the sandbox had a line of its own) keeps its rows, and its table is brought to
// the sandbox's schema (PostgreSQL: byte-ordered keys without the second index).
func TestAdoptsTheBrokersTable(t *testing.T) {
	ctx := context.Background()
	for name, newEnv := range map[string]newEnv{"sqlite": sqliteEnv, "postgres": postgresEnv} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			before, err := os.ReadFile(filepath.Join("testdata", name+"_before.sql"))
			require.NoError(t, err)
			// The broker's store on an empty database, then the table as its old migrations made it.
			var s storage.Store
			if name == "sqlite" {
				path := filepath.Join(t.TempDir(), "keb.db")
				s, err = sqlite.Open(ctx, sqlite.Config{Path: path}, storagetest.Keyring(t, storagetest.Key(t)), nil)
				e = &env{open: func(t *testing.T) *Objects {
					s2, err := sqlite.Open(ctx, sqlite.Config{Path: path}, storagetest.Keyring(t, storagetest.Key(t)), nil)
					require.NoError(t, err)
					return openOn(t, s2)
				}}
			} else {
				url := pgtest.NewDatabase(t)
				s, err = postgres.Open(ctx, postgres.Config{URL: url, MaxOpenConns: 4}, storagetest.Keyring(t, storagetest.Key(t)), nil)
				e = &env{open: func(t *testing.T) *Objects {
					s2, err := postgres.Open(ctx, postgres.Config{URL: url, MaxOpenConns: 4}, storagetest.Keyring(t, storagetest.Key(t)), nil)
					require.NoError(t, err)
					return openOn(t, s2)
				}}
			}
			require.NoError(t, err)
			db := s.Database().Writer
			_, err = db.ExecContext(ctx, string(before))
			require.NoError(t, err)
			_, err = db.ExecContext(ctx, db.Rebind("INSERT INTO sandbox_objects (system, kind, object_key, value) VALUES (?, ?, ?, ?)"), "director", "runtime", "t/1", `{"id":"1"}`)
			require.NoError(t, err)
			require.NoError(t, s.Close())

			o := e.open(t)
			got, err := o.Load(ctx, "director")
			require.NoError(t, err)
			assert.Equal(t, rows{"runtime": {"t/1": []byte(`{"id":"1"}`)}}, got, "the adopted table keeps its rows")
			pre, err := o.Prefix(ctx, "director", "runtime", "t/")
			require.NoError(t, err)
			assert.Len(t, pre, 1)
			var version int
			require.NoError(t, o.db.GetContext(ctx, &version, "SELECT MAX(version) FROM "+VersionTable))
			assert.Equal(t, 1, version)
			if name == "postgres" {
				var collation string
				require.NoError(t, o.db.GetContext(ctx, &collation, `SELECT c.collname FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation
					WHERE a.attrelid = 'sandbox_objects'::regclass AND a.attname = 'object_key'`))
				assert.Equal(t, "C", collation)
				var indexes int
				require.NoError(t, o.db.GetContext(ctx, &indexes, "SELECT count(*) FROM pg_indexes WHERE tablename = 'sandbox_objects'"))
				assert.Equal(t, 1, indexes, "the primary key alone")
			}
			// A second open finds the line current and changes nothing.
			again := e.open(t)
			got, err = again.Load(ctx, "director")
			require.NoError(t, err)
			assert.Equal(t, rows{"runtime": {"t/1": []byte(`{"id":"1"}`)}}, got)
		})
	}
}
