package app

import (
	"testing"
	"time"

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
