package driver_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver/sqlite"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/encryption"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/sqlstore"
)

func TestConfigDefaults(t *testing.T) {
	var cfg driver.Config
	require.NoError(t, envconfig.Process("APP", &cfg))
	assert.Equal(t, driver.Config{Driver: "sqlite", Path: "keb.db", Host: "localhost", Port: 5432, User: "postgres",
		Password: "password", Name: "provisioner", SSLMode: "disable", MaxOpenConns: 50, LockLease: 15 * time.Second}, cfg)
	assert.Equal(t, "postgres://postgres:password@localhost:5432/provisioner?sslmode=disable", cfg.Postgres().DSN())
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("APP_DATABASE_DRIVER", "postgres")
	t.Setenv("APP_DATABASE_URL", "postgres://u:p@h/db")
	t.Setenv("APP_DATABASE_SECRET_KEYS_PREVIOUS", "a,b")
	t.Setenv("APP_DATABASE_MAX_OPEN_CONNS", "7")
	var cfg driver.Config
	require.NoError(t, envconfig.Process("APP", &cfg))
	assert.Equal(t, "postgres", cfg.Driver)
	assert.Equal(t, []string{"a", "b"}, cfg.SecretKeysPrevious)
	assert.Equal(t, "postgres://u:p@h/db", cfg.Postgres().DSN())
	assert.Equal(t, 7, cfg.Postgres().MaxOpenConns)
}

func TestBadDriver(t *testing.T) {
	_, err := driver.Open(context.Background(), driver.Config{Driver: "mysql"}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "APP_DATABASE_DRIVER")
	_, err = driver.Migrate(context.Background(), driver.Config{Driver: ""}, nil)
	assert.ErrorContains(t, err, "APP_DATABASE_DRIVER")
}

func TestPostgresNeedsKey(t *testing.T) {
	_, err := driver.Open(context.Background(), driver.Config{Driver: "postgres", Host: "127.0.0.1", Port: 1}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "APP_DATABASE_SECRET_KEY")
}

func TestBadKeyNamed(t *testing.T) {
	_, err := driver.Open(context.Background(), driver.Config{Driver: "sqlite", Path: filepath.Join(t.TempDir(), "x.db"), SecretKey: "short-secret-value"}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "APP_DATABASE_SECRET_KEY")
	assert.NotContains(t, err.Error(), "short-secret-value")
}

func TestSQLiteGeneratesAndReusesKey(t *testing.T) {
	ctx := context.Background()
	cfg := driver.Config{Driver: "sqlite", Path: filepath.Join(t.TempDir(), "keb.db")}
	s, err := driver.Open(ctx, cfg, nil)
	require.NoError(t, err)
	fi, err := os.Stat(cfg.KeyFile())
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	key, err := os.ReadFile(cfg.KeyFile())
	require.NoError(t, err)
	_, err = encryption.NewKeyring(strings.TrimSpace(string(key)))
	require.NoError(t, err)
	_, err = s.Instances().InsertInstance(ctx, storage.Instance{InstanceID: "i", Secrets: storage.Secrets{"a": "b"}})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s, err = driver.Open(ctx, cfg, nil)
	require.NoError(t, err)
	defer s.Close()
	got, err := s.Instances().GetInstance(ctx, "i")
	require.NoError(t, err, "the generated key is reused")
	assert.Equal(t, "b", got.Secrets["a"])
	key2, err := os.ReadFile(cfg.KeyFile())
	require.NoError(t, err)
	assert.Equal(t, key, key2)

	v, err := driver.Migrate(ctx, cfg, nil)
	require.NoError(t, err)
	latest, err := sqlstore.LatestVersion(sqlite.Migrations())
	require.NoError(t, err)
	assert.Equal(t, latest, v)
}
