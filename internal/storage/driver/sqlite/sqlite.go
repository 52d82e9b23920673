// Package sqlite opens the KEB store on a SQLite file (pure Go, modernc.org/sqlite). Writes go
// through a single connection whose transactions begin IMMEDIATE, so concurrent engine workers
// never see SQLITE_BUSY from each other; reads use a separate pool (WAL lets them run alongside).
package sqlite

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/migrate"
	"io/fs"
	"net/url"

	sq "github.com/Masterminds/squirrel"
	"github.com/jmoiron/sqlx"
	"github.com/sirupsen/logrus"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/encryption"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/sqlstore"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Config says where the database file is.
type Config struct {
	Path string
	// MaxReadConns is the size of the read pool (default 4).
	MaxReadConns int
}

// Migrations are the embedded schema migrations.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the embedded directory always exists
	}
	return sub
}

func dialect() sqlstore.Dialect {
	return sqlstore.Dialect{
		Name:          "sqlite",
		Placeholder:   sq.Question,
		BindType:      sqlx.QUESTION,
		TimeAsMicros:  true,
		TimestampType: "INTEGER",
		LocalReads:    true,
		IsUniqueViolation: func(err error) bool {
			var se *sqlite.Error
			if !errors.As(err, &se) {
				return false
			}
			return se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE
		},
	}
}

// readCacheKiB is the page cache of each read connection (SQLite's default is 2 MiB).
const readCacheKiB = 16 << 10

func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
		// Reads (last_operation polls above all) touch one table page per operation: with the
		// default 2 MiB cache per connection, a few thousand polled operations were read from
		// the file again and again (a pread per page). Pages are cached as they
		// are read, so a small database costs no more.
		q.Add("_pragma", fmt.Sprintf("cache_size(-%d)", readCacheKiB))
	} else {
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// Open opens (creating if needed) the database file, applies migrations and returns the store.
func Open(ctx context.Context, cfg Config, kr *encryption.Keyring, log logrus.FieldLogger) (storage.Store, error) {
	s, err := OpenStore(ctx, cfg, kr, log)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// OpenStore is Open returning the concrete store (for tests and tools that need DB()).
func OpenStore(ctx context.Context, cfg Config, kr *encryption.Keyring, log logrus.FieldLogger) (*sqlstore.Store, error) {
	w, err := openWriter(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := sqlstore.Migrate(ctx, w, dialect(), Migrations(), log); err != nil {
		_ = w.Close()
		return nil, err
	}
	r, err := sqlx.Open("sqlite", dsn(cfg.Path, true))
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("opening sqlite database %s for reading: %w", cfg.Path, err)
	}
	n := cfg.MaxReadConns
	if n <= 0 {
		n = 4
	}
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	s, err := sqlstore.New(ctx, sqlstore.Config{DB: w, ReadDB: r, Dialect: dialect(), Keyring: kr, Log: log})
	if err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, fmt.Errorf("opening sqlite store: %w", err)
	}
	if err := s.Ping(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// Migrate applies the migrations alone and returns the schema version.
func Migrate(ctx context.Context, cfg Config, log logrus.FieldLogger) (int, error) {
	w, err := openWriter(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer w.Close()
	return sqlstore.Migrate(ctx, w, dialect(), Migrations(), log)
}

// OpenWriter opens the database file at path (creating it) with its single writer connection,
// for a component that keeps a database file of its own.
func OpenWriter(ctx context.Context, path string) (*sqlx.DB, error) {
	return openWriter(ctx, Config{Path: path})
}

func openWriter(ctx context.Context, cfg Config) (*sqlx.DB, error) {
	if cfg.Path == "" {
		return nil, errors.New("opening sqlite database: no path")
	}
	w, err := sqlx.Open("sqlite", dsn(cfg.Path, false))
	if err != nil {
		return nil, fmt.Errorf("opening sqlite database %s: %w", cfg.Path, err)
	}
	// One writer connection: writes (and their transactions) are serialised in this process.
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if err := w.PingContext(ctx); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("opening sqlite database %s: %w", cfg.Path, err)
	}
	return w, nil
}

// OpenMigrator opens the database and its migration line (schema_migrations) for an operator's
// command (up, down, version, force); close releases both.
func OpenMigrator(ctx context.Context, cfg Config) (m *migrate.Migrator, closeFn func() error, err error) {
	return OpenLineMigrator(ctx, cfg, migrate.Line{Table: "schema_migrations", Migrations: Migrations()})
}

// OpenLineMigrator is OpenMigrator for another component's migration line in the same database.
func OpenLineMigrator(ctx context.Context, cfg Config, l migrate.Line) (m *migrate.Migrator, closeFn func() error, err error) {
	w, err := openWriter(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return migrate.OpenOwned(ctx, w.DB, "sqlite", l)
}
