// Package driver opens the store configured by the APP_DATABASE_* environment variables:
// SQLite (the default, one file) or PostgreSQL.
package driver

import (
	"context"
	"errors"
	"fmt"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/migrate"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kyma-project/kyma-environment-broker/internal/secretfile"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver/postgres"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver/sqlite"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/encryption"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/sqlstore"
)

const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// Config is read with envconfig.Process("APP", &cfg): APP_DATABASE_DRIVER etc.
type Config struct {
	Driver   string `envconfig:"DATABASE_DRIVER" default:"sqlite"`
	Path     string `envconfig:"DATABASE_PATH" default:"keb.db"`
	Host     string `envconfig:"DATABASE_HOST" default:"localhost"`
	Port     int    `envconfig:"DATABASE_PORT" default:"5432"`
	User     string `envconfig:"DATABASE_USER" default:"postgres"`
	Password string `envconfig:"DATABASE_PASSWORD" default:"password"`
	Name     string `envconfig:"DATABASE_NAME" default:"provisioner"`
	SSLMode  string `envconfig:"DATABASE_SSL_MODE" default:"disable"`
	// URL, when set, overrides Host, Port, User, Password, Name and SSLMode.
	URL string `envconfig:"DATABASE_URL"`
	// SecretKey encrypts secrets at rest (32 bytes, or base64 of 32 bytes). Required for
	// PostgreSQL; for SQLite a key is generated into <Path>.key when unset.
	SecretKey string `envconfig:"DATABASE_SECRET_KEY"`
	// SecretKeysPrevious (comma-separated) can still decrypt; RotateSecrets moves data off them.
	SecretKeysPrevious []string `envconfig:"DATABASE_SECRET_KEYS_PREVIOUS"`
	MaxOpenConns       int      `envconfig:"DATABASE_MAX_OPEN_CONNS" default:"50"`
	// LockLease: how long a replica holds a singleton lock (the orchestration scheduler, the
	// lifecycle jobs) without renewing it; a replica that hangs loses it after this long.
	LockLease time.Duration `envconfig:"DATABASE_LOCK_LEASE" default:"15s"`
}

// Validate checks the driver name.
func (c Config) Validate() error {
	switch c.Driver {
	case SQLite, Postgres:
		return nil
	default:
		return fmt.Errorf("APP_DATABASE_DRIVER is %q: must be %q or %q", c.Driver, SQLite, Postgres)
	}
}

// Postgres is the PostgreSQL part of the configuration.
func (c Config) Postgres() postgres.Config {
	return postgres.Config{URL: c.URL, Host: c.Host, Port: c.Port, User: c.User, Password: c.Password,
		Name: c.Name, SSLMode: c.SSLMode, MaxOpenConns: c.MaxOpenConns, LockLease: c.LockLease}
}

// SQLite is the SQLite part of the configuration.
func (c Config) SQLite() sqlite.Config { return sqlite.Config{Path: c.Path} }

// KeyFile is where a generated SQLite key is kept.
func (c Config) KeyFile() string { return c.Path + ".key" }

// Open builds the keyring, opens the configured database and applies migrations.
func Open(ctx context.Context, cfg Config, log logrus.FieldLogger) (storage.Store, error) {
	if log == nil {
		l := logrus.New()
		l.SetLevel(logrus.PanicLevel)
		log = l
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	kr, err := Keyring(cfg, log)
	if err != nil {
		return nil, err
	}
	switch cfg.Driver {
	case Postgres:
		return postgres.Open(ctx, cfg.Postgres(), kr, log)
	default:
		return sqlite.Open(ctx, cfg.SQLite(), kr, log)
	}
}

// Migrate applies the configured database's migrations alone and returns the schema version.
func Migrate(ctx context.Context, cfg Config, log logrus.FieldLogger) (int, error) {
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	switch cfg.Driver {
	case Postgres:
		return postgres.Migrate(ctx, cfg.Postgres(), log)
	default:
		return sqlite.Migrate(ctx, cfg.SQLite(), log)
	}
}

// Keyring builds the encryption keyring from the configuration. For SQLite with no key
// configured, the key is read from (or on first start generated into) KeyFile.
func Keyring(cfg Config, log logrus.FieldLogger) (*encryption.Keyring, error) {
	var previous []string
	for _, k := range cfg.SecretKeysPrevious {
		if k = strings.TrimSpace(k); k != "" {
			previous = append(previous, k)
		}
	}
	primary := cfg.SecretKey
	if primary == "" {
		if cfg.Driver != SQLite {
			return nil, errors.New("APP_DATABASE_SECRET_KEY is not set: PostgreSQL needs a key to encrypt secrets at rest (32 bytes, or base64 of 32 bytes)")
		}
		k, err := sqliteKey(cfg.KeyFile(), log)
		if err != nil {
			return nil, err
		}
		primary = k
	}
	kr, err := encryption.NewKeyring(primary, previous...)
	if err != nil {
		return nil, fmt.Errorf("APP_DATABASE_SECRET_KEY / APP_DATABASE_SECRET_KEYS_PREVIOUS: %w", err)
	}
	return kr, nil
}

func sqliteKey(path string, log logrus.FieldLogger) (string, error) {
	k, created, err := secretfile.ReadOrCreate(path, encryption.GenerateKey)
	if err != nil {
		return "", fmt.Errorf("database key file: %w", err)
	}
	if created {
		log.WithField("file", path).Warn("APP_DATABASE_SECRET_KEY is not set: generated a new key for encrypting secrets in the SQLite database; keep this file with the database, secrets cannot be read without it")
	} else {
		log.WithField("file", path).Info("APP_DATABASE_SECRET_KEY is not set: using the SQLite database key from the key file")
	}
	return k, nil
}

// LatestSchemaVersion is the newest migration embedded for the configured driver.
func LatestSchemaVersion(cfg Config) (int, error) {
	if cfg.Driver == Postgres {
		return sqlstore.LatestVersion(postgres.Migrations())
	}
	return sqlstore.LatestVersion(sqlite.Migrations())
}

// OpenMigrator opens the configured database's migration line for an operator's command (up,
// down, version, force); close releases it.
func OpenMigrator(ctx context.Context, cfg Config) (*migrate.Migrator, func() error, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	if cfg.Driver == Postgres {
		return postgres.OpenMigrator(ctx, cfg.Postgres())
	}
	return sqlite.OpenMigrator(ctx, cfg.SQLite())
}

// OpenLineMigrator is OpenMigrator for another component's migration line kept in the same
// database; line gives the line's table and migrations for the configured driver's name.
func OpenLineMigrator(ctx context.Context, cfg Config, line func(driver string) (migrate.Line, error)) (*migrate.Migrator, func() error, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	l, err := line(cfg.Driver)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Driver == Postgres {
		return postgres.OpenLineMigrator(ctx, cfg.Postgres(), l)
	}
	return sqlite.OpenLineMigrator(ctx, cfg.SQLite(), l)
}
