package externals_test

import (
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/externals"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These configure every system through the stand-ins (which import externals: hence the
// external test package).

func TestPointAtTheSandboxConfiguresEverySystem(t *testing.T) {
	cfg, err := externals.Load()
	require.NoError(t, err)
	standins.PointAt(&cfg, "http://127.0.0.1:8090/", standins.DefaultCredentials())
	cfg.SetRetryBackoff(0, time.Second)
	b, err := cfg.Build()
	require.NoError(t, err)
	s := b.Systems
	assert.True(t, s.AVS != nil && s.EDP != nil && s.IAS != nil && s.ServiceManager != nil && s.EventHubs != nil && s.Reconciler != nil && s.Director != nil)
	assert.NotNil(t, b.Director, "the provisioner gets the real Director")
	assert.Equal(t, "http://127.0.0.1:8090/avs", cfg.AVS.URL)
	assert.Equal(t, "http://127.0.0.1:8090/director/graphql", cfg.Director.URL)
	assert.Equal(t, time.Second, cfg.Reconciler.RetryMaxBackoff)
	assert.Equal(t, 200*time.Millisecond, cfg.Reconciler.RetryInitialBackoff, "a zero bound is left as it is")
}

func TestBadAccountPoolAndOverridesFileAreNamed(t *testing.T) {
	t.Setenv("APP_HYPERSCALER_ACCOUNT_POOL", "aws")
	t.Setenv("APP_OVERRIDES_FILE", "/nonexistent/overrides.yaml")
	cfg, err := externals.Load()
	require.NoError(t, err)
	standins.PointAt(&cfg, "http://127.0.0.1:8090", standins.DefaultCredentials())
	_, err = cfg.Build()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "APP_HYPERSCALER_ACCOUNT_POOL")
	assert.Contains(t, err.Error(), "APP_OVERRIDES_FILE")
}
