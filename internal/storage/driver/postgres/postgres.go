// Package postgres opens the KEB store on PostgreSQL.
package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/migrate"
	"io/fs"
	"net/url"
	"strconv"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/sirupsen/logrus"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/encryption"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/sqlstore"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// NotifyChannel is the LISTEN/NOTIFY channel that wakes the engines of all replicas.
const NotifyChannel = "keb_operations"

// Config says where the database is: URL, or else the separate fields.
type Config struct {
	URL      string
	Host     string
	Port     int
	User     string
	Password string
	Name     string
	SSLMode  string

	// MaxOpenConns defaults to 50, MaxIdleConns to MaxOpenConns: fewer idle than open connections
	// closed and reopened them under load (a SCRAM handshake and re-prepared statements each).
	MaxOpenConns    int
	MaxIdleConns    int
	ConnMaxLifetime time.Duration
	// LockLease: how long a singleton lock is held without renewal (sqlstore.Config.LockLease).
	LockLease time.Duration
}

// DSN is the connection URL: URL if set, else built from the fields.
func (c Config) DSN() string {
	if c.URL != "" {
		return c.URL
	}
	u := url.URL{Scheme: "postgres", Host: c.Host, Path: "/" + c.Name}
	if c.Port != 0 {
		u.Host = c.Host + ":" + strconv.Itoa(c.Port)
	}
	if c.User != "" {
		u.User = url.UserPassword(c.User, c.Password)
	}
	if c.SSLMode != "" {
		u.RawQuery = url.Values{"sslmode": {c.SSLMode}}.Encode()
	}
	return u.String()
}

// Migrations are the embedded schema migrations.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the embedded directory always exists
	}
	return sub
}

// Open connects, applies migrations and returns the store.
func Open(ctx context.Context, cfg Config, kr *encryption.Keyring, log logrus.FieldLogger) (storage.Store, error) {
	s, err := OpenStore(ctx, cfg, kr, log)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// OpenStore is Open returning the concrete store (for tests and tools that need DB()).
func OpenStore(ctx context.Context, cfg Config, kr *encryption.Keyring, log logrus.FieldLogger) (*sqlstore.Store, error) {
	log = orDiscard(log)
	db, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// Every pool opened so far is closed when a later step fails.
	pools := []*sqlx.DB{db}
	fail := func(err error) (*sqlstore.Store, error) {
		for _, p := range pools {
			_ = p.Close()
		}
		return nil, err
	}
	d := dialect(cfg.DSN(), log)
	if _, err := sqlstore.Migrate(ctx, db, d, Migrations(), log); err != nil {
		return fail(err)
	}
	var batch, claims, unflushed *sqlx.DB
	for _, p := range []struct {
		db    **sqlx.DB
		conns int
		set   string
	}{{&batch, batchConns, planOnce}, {&claims, claimConns, readInOrder}, {&unflushed, unflushedConns, noFlushWait}} {
		if *p.db, err = connectWith(ctx, cfg, p.conns, p.set); err != nil {
			return fail(err)
		}
		pools = append(pools, *p.db)
	}
	s, err := sqlstore.New(ctx, sqlstore.Config{DB: db, BatchDB: batch, ClaimDB: claims, UnflushedDB: unflushed,
		Dialect: d, Keyring: kr, Log: log, LockLease: cfg.LockLease})
	if err != nil {
		return fail(fmt.Errorf("opening postgres store: %w", err))
	}
	return s, nil
}

// The store's pools besides the main one, each with what its sessions are set to.
const (
	// batchConns: the store's batch executors (two for saves, four for last_operation reads)
	// each hold at most one connection.
	batchConns = 6
	// planOnce: the batched statements join arrays to primary keys, so a plan for their
	// parameters is no better than the generic one; PostgreSQL re-planned them on every
	// execution (sqlstore.Config.BatchDB).
	planOnce = "SET plan_cache_mode = force_generic_plan"
	// claimConns: the engines claim from one loop each.
	claimConns = 2
	// readInOrder: a claim reads the due operations in index order and stops (a plan that
	// sorts reads all of them; sqlstore.Config.ClaimDB). Its commit does not wait for the WAL
	// flush: lost with the server, the lease was never taken, and the worker's first save,
	// which names the claim's version, fails; the save that does commit flushes the claim
	// before it (WAL is flushed in order).
	readInOrder = "SET enable_sort = off; " + noFlushWait
	// unflushedConns: the stand-ins' writer, the wakes and the notifications
	// (sqlstore.Config.UnflushedDB).
	unflushedConns = 4
	// noFlushWait: commits return without waiting for their WAL flush, which the next flushed
	// commit (any session's), or the WAL writer within ~0.6 s, does.
	noFlushWait = "SET synchronous_commit = off"
)

// connectWith opens a pool of size conns whose sessions are set with set.
func connectWith(ctx context.Context, cfg Config, conns int, set string) (*sqlx.DB, error) {
	c, err := connector(cfg)
	if err != nil {
		return nil, err
	}
	return pool(ctx, sqlx.NewDb(sql.OpenDB(sessionSettings{Connector: c, set: set}), "postgres"), cfg, conns, conns)
}

// connector connects to cfg's database with binary parameters: lib/pq then sends a []byte
// parameter in binary format (a bytea as its bytes, not hex; the batched statements' arrays,
// see sqlstore's pgarray.go) and any other parameter as text, as before.
func connector(cfg Config) (*pq.Connector, error) {
	pc, err := pq.NewConfig(cfg.DSN())
	if err != nil {
		return nil, fmt.Errorf("opening postgres database %s: %w", redacted(cfg.DSN()), err)
	}
	pc.BinaryParameters = true
	c, err := pq.NewConnectorConfig(pc)
	if err != nil {
		return nil, fmt.Errorf("opening postgres database %s: %w", redacted(cfg.DSN()), err)
	}
	return c, nil
}

// pool sizes db and checks that it connects.
func pool(ctx context.Context, db *sqlx.DB, cfg Config, maxOpen, maxIdle int) (*sqlx.DB, error) {
	lifetime := cfg.ConnMaxLifetime
	if lifetime <= 0 {
		lifetime = 30 * time.Minute
	}
	db.SetMaxOpenConns(maxOpen)
	db.SetMaxIdleConns(maxIdle)
	db.SetConnMaxLifetime(lifetime)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("connecting to postgres database %s: %w", redacted(cfg.DSN()), err)
	}
	return db, nil
}

// sessionSettings connects with c and applies set to each new session.
type sessionSettings struct {
	driver.Connector
	set string
}

func (s sessionSettings) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := s.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	exec, ok := conn.(driver.ExecerContext)
	if !ok {
		_ = conn.Close()
		return nil, fmt.Errorf("applying %q: the connection cannot execute statements", s.set)
	}
	if _, err := exec.ExecContext(ctx, s.set, nil); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("applying %q: %w", s.set, err)
	}
	return conn, nil
}

// Migrate applies the migrations alone and returns the schema version.
func Migrate(ctx context.Context, cfg Config, log logrus.FieldLogger) (int, error) {
	log = orDiscard(log)
	db, err := connect(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	return sqlstore.Migrate(ctx, db, dialect(cfg.DSN(), log), Migrations(), log)
}

func connect(ctx context.Context, cfg Config) (*sqlx.DB, error) {
	c, err := connector(cfg)
	if err != nil {
		return nil, err
	}
	db := sqlx.NewDb(sql.OpenDB(c), "postgres")
	maxOpen := cfg.MaxOpenConns
	if maxOpen <= 0 {
		maxOpen = 50
	}
	maxIdle := cfg.MaxIdleConns
	if maxIdle <= 0 {
		maxIdle = maxOpen
	}
	return pool(ctx, db, cfg, maxOpen, maxIdle)
}

func dialect(dsn string, log logrus.FieldLogger) sqlstore.Dialect {
	return sqlstore.Dialect{
		Name:          "postgres",
		Placeholder:   sq.Dollar,
		BindType:      sqlx.DOLLAR,
		TimestampType: "TIMESTAMPTZ",
		SkipLocked:    true,
		Array:         func(v any) any { return pq.Array(v) },
		IsUniqueViolation: func(err error) bool {
			var pe *pq.Error
			return errors.As(err, &pe) && pe.Code == "23505"
		},
		// Sent on the unflushed sessions (sqlstore.Config.UnflushedDB).
		Notify:      "SELECT pg_notify('" + NotifyChannel + "', $1)",
		WritableCTE: true,
		XactLockSQL: "SELECT pg_advisory_xact_lock(hashtext(?))",
		// A row, not a session advisory lock: a holder that hangs with its connection open
		// (SIGSTOP) kept the advisory lock for as long as it hung.
		LeaseLockSQL: `INSERT INTO singleton_leases (name, holder, expires_at) VALUES (?, ?, clock_timestamp() + ? * interval '1 millisecond')
			ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
			WHERE singleton_leases.expires_at < clock_timestamp() RETURNING holder`,
		RenewLockSQL:   `UPDATE singleton_leases SET expires_at = clock_timestamp() + ? * interval '1 millisecond' WHERE name = ? AND holder = ?`,
		ReleaseLockSQL: `DELETE FROM singleton_leases WHERE name = ? AND holder = ?`,
		Listen: func(ctx context.Context, ignore string) (<-chan struct{}, error) {
			return listen(ctx, dsn, ignore, log)
		},
		ByteOrder: ` COLLATE "C"`,
		JSONCast:  "::json",
	}
}

// listen opens a dedicated LISTEN connection; the returned channel receives a value for every
// notification but those whose payload is ignore (the listening store's own: it woke its
// subscribers in-process), and after every reconnect (notifications may have been missed), and
// is closed once ctx ends.
func listen(ctx context.Context, dsn, ignore string, log logrus.FieldLogger) (<-chan struct{}, error) {
	l := pq.NewListener(dsn, 100*time.Millisecond, 10*time.Second, func(ev pq.ListenerEventType, err error) {
		if err != nil {
			log.WithError(err).WithField("event", ev.String()).Warn("postgres wake-up listener")
		}
	})
	if err := l.Listen(NotifyChannel); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("LISTEN %s: %w", NotifyChannel, err)
	}
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		defer l.Close()
		ping := time.NewTicker(60 * time.Second)
		defer ping.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case n := <-l.Notify: // nil after a reconnect: wake up too
				if n != nil && ignore != "" && n.Extra == ignore {
					continue
				}
				select {
				case out <- struct{}{}:
				default:
				}
			case <-ping.C:
				go func() { _ = l.Ping() }()
			}
		}
	}()
	return out, nil
}

func redacted(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		return "(connection string)"
	}
	return u.Redacted()
}

func orDiscard(log logrus.FieldLogger) logrus.FieldLogger {
	if log != nil {
		return log
	}
	l := logrus.New()
	l.SetLevel(logrus.PanicLevel)
	return l
}

// OpenMigrator opens the database and its migration line (schema_migrations) for an operator's
// command (up, down, version, force); close releases both.
func OpenMigrator(ctx context.Context, cfg Config) (m *migrate.Migrator, closeFn func() error, err error) {
	return OpenLineMigrator(ctx, cfg, migrate.Line{Table: "schema_migrations", Migrations: Migrations()})
}

// OpenLineMigrator is OpenMigrator for another component's migration line in the same database.
func OpenLineMigrator(ctx context.Context, cfg Config, l migrate.Line) (m *migrate.Migrator, closeFn func() error, err error) {
	db, err := connect(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return migrate.OpenOwned(ctx, db.DB, "postgres", l)
}
