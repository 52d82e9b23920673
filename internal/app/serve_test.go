package app

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigurationVariableNames(t *testing.T) {
	t.Setenv("APP_PORT", "9090")
	t.Setenv("APP_BROKER_OPERATION_TIMEOUT", "2h")
	t.Setenv("APP_BROKER_DEFAULT_REQUEST_REGION", "cf-us30")
	t.Setenv("APP_RUNTIME_KYMA_VERSION", "2.21.0")
	t.Setenv("APP_BROKER_USERNAME", "u")
	t.Setenv("APP_DATABASE_DRIVER", "postgres")
	t.Setenv("APP_ENGINE_WORKERS", "7")
	t.Setenv("APP_DEFAULT_PROVISIONER", "gardener")
	cfg, err := Load()
	require.NoError(t, err)
	assert.Equal(t, 9090, cfg.Port)
	assert.Equal(t, 2*time.Hour, cfg.Broker.OperationTimeout)
	assert.Equal(t, "cf-us30", cfg.Broker.DefaultRequestRegion)
	assert.Equal(t, "2.21.0", cfg.Runtime.KymaVersion)
	assert.Equal(t, "u", cfg.Auth.Username)
	assert.Equal(t, "postgres", cfg.Database.Driver)
	assert.Equal(t, 7, cfg.Engine.Workers)
	assert.Equal(t, "gardener", cfg.Backends.Default)
	assert.Equal(t, []string{"istio", "api-gateway", "serverless", "eventing", "monitoring"}, cfg.Runtime.Components)
}

// A taken port failed only after the database and the engine had started, without naming the
// variable.
func TestServeFailsFastOnATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	dir := t.TempDir()
	t.Setenv("APP_PORT", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	t.Setenv("APP_DATABASE_PATH", filepath.Join(dir, "keb.db"))
	cfg, err := Load()
	require.NoError(t, err)
	log := logrus.New()
	log.SetOutput(io.Discard)
	err = Serve(context.Background(), cfg, log)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "APP_PORT")
	_, statErr := os.Stat(filepath.Join(dir, "keb.db"))
	assert.True(t, os.IsNotExist(statErr), "nothing was started before the bind")
}

// The generated password changed on every restart.
func TestGeneratedCredentialsSurviveRestarts(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keb.credentials")
	log := logrus.New()
	log.SetOutput(io.Discard)
	var passwords []string
	for range 2 {
		cfg := Config{CredentialsFile: file}
		_, err := authRoutes(context.Background(), &cfg, log)
		require.NoError(t, err)
		assert.Equal(t, generatedUser, cfg.Auth.Username)
		assert.Len(t, cfg.Auth.Password, 32)
		passwords = append(passwords, cfg.Auth.Password)
	}
	assert.Equal(t, passwords[0], passwords[1])
	st, err := os.Stat(file)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "readable by the owner only")
}
