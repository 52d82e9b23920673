package externals

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/hyperscaler"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnconfiguredSystemsStopTheBrokerNamingTheVariables(t *testing.T) {
	cfg, err := Load()
	require.NoError(t, err)
	_, err = cfg.Build()
	require.Error(t, err)
	for _, name := range []string{"APP_AVS_URL", "APP_AVS_DISABLED", "APP_EDP_DISABLED", "APP_IAS_DISABLED", "APP_SERVICE_MANAGER_DISABLED",
		"APP_AZURE_EVENT_HUBS_DISABLED", "APP_RECONCILER_URL", "APP_RECONCILER_DISABLED", "APP_DIRECTOR_DISABLED"} {
		assert.Contains(t, err.Error(), name)
	}
}

func TestDisabledSystemsAreNil(t *testing.T) {
	for _, v := range []string{"APP_AVS_DISABLED", "APP_EDP_DISABLED", "APP_IAS_DISABLED", "APP_SERVICE_MANAGER_DISABLED",
		"APP_AZURE_EVENT_HUBS_DISABLED", "APP_RECONCILER_DISABLED", "APP_DIRECTOR_DISABLED"} {
		t.Setenv(v, "true")
	}
	cfg, err := Load()
	require.NoError(t, err)
	b, err := cfg.Build()
	require.NoError(t, err)
	s := b.Systems
	assert.True(t, s.AVS == nil && s.EDP == nil && s.IAS == nil && s.ServiceManager == nil && s.EventHubs == nil && s.Reconciler == nil && s.Director == nil)
	assert.Nil(t, b.Director)
	assert.Equal(t, 10*time.Minute, s.RetryTime)
	assert.Equal(t, 5*time.Minute, s.CleanupRetryTime)
	secret, err := s.AccountPool.Resolve(context.Background(), hyperscaler.Request{Provider: "aws", Tenant: "ga"})
	require.NoError(t, err)
	assert.Equal(t, "kyma-aws", secret, "the default account pool")
}

func TestInstrumentReachesEveryClient(t *testing.T) {
	var cfg Config
	m, err := clientkit.NewCallMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	cfg.Instrument(m)
	for name, got := range map[string]*clientkit.CallMetrics{
		"AVS": cfg.AVS.Metrics, "EDP": cfg.EDP.Metrics, "IAS": cfg.IAS.Metrics, "ServiceManager": cfg.ServiceManager.Metrics,
		"Azure": cfg.Azure.Metrics, "Reconciler": cfg.Reconciler.Metrics, "Director": cfg.Director.Metrics,
	} {
		assert.Same(t, m, got, name)
	}
}

func TestCallPolicyReachesEveryClient(t *testing.T) {
	cfg, err := Load()
	require.NoError(t, err)
	assert.Equal(t, 15*time.Second, cfg.Settings.CallTimeout, "one call's budget by default")
	want := clientkit.Calls{Attempts: 3, Timeout: 15 * time.Second, BreakerThreshold: 10, BreakerCooldown: 15 * time.Second}
	for _, b := range cfg.clientCalls() {
		assert.Equal(t, want, *b.calls, "the defaults")
	}

	t.Setenv("APP_EXTERNAL_CALL_ATTEMPTS", "2")
	t.Setenv("APP_EXTERNAL_CALL_TIMEOUT", "7s")
	t.Setenv("APP_EXTERNAL_CALL_BREAKER_THRESHOLD", "4")
	t.Setenv("APP_EXTERNAL_CALL_BREAKER_COOLDOWN", "1m")
	cfg, err = Load()
	require.NoError(t, err)
	assert.Equal(t, 7*time.Second, cfg.Settings.CallTimeout)
	want = clientkit.Calls{Attempts: 2, Timeout: 7 * time.Second, BreakerThreshold: 4, BreakerCooldown: time.Minute}
	for name, got := range map[string]clientkit.Calls{
		"AVS": cfg.AVS.Calls, "EDP": cfg.EDP.Calls, "IAS": cfg.IAS.Calls, "ServiceManager": cfg.ServiceManager.Calls,
		"Azure": cfg.Azure.Calls, "Reconciler": cfg.Reconciler.Calls, "Director": cfg.Director.Calls,
	} {
		assert.Equal(t, want, got, name)
	}

	cfg.SetCalls(clientkit.Calls{Attempts: 1})
	for _, b := range cfg.clientCalls() {
		assert.Equal(t, clientkit.Calls{Attempts: 1}, *b.calls)
	}
}

// The account pool lives on the gardener backend's cluster: APP_GARDENER_* (or a provisioner
// set with a gardener entry) make it Gardener's; without them it is the list.
func TestAccountPoolOnTheGardenerBackend(t *testing.T) {
	for _, v := range []string{"APP_AVS_DISABLED", "APP_EDP_DISABLED", "APP_IAS_DISABLED", "APP_SERVICE_MANAGER_DISABLED",
		"APP_AZURE_EVENT_HUBS_DISABLED", "APP_RECONCILER_DISABLED", "APP_DIRECTOR_DISABLED"} {
		t.Setenv(v, "true")
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: g, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: g, user: u}}]
current-context: c
`), 0o600))
	t.Setenv("APP_GARDENER_PROJECT", "kyma-dev")
	t.Setenv("APP_GARDENER_KUBECONFIG_PATH", kc)
	t.Setenv("APP_HYPERSCALER_ACCOUNT_POOL_BINDING_KIND", "CredentialsBinding")
	cfg, err := Load()
	require.NoError(t, err)
	b, err := cfg.Build()
	require.NoError(t, err)
	g, ok := b.Systems.AccountPool.(*hyperscaler.Gardener)
	require.True(t, ok, "%T", b.Systems.AccountPool)
	assert.Equal(t, "garden-kyma-dev", g.Namespace())
	assert.Equal(t, hyperscaler.CredentialsBinding, g.Kind())
	assert.Equal(t, hyperscaler.DefaultRules(), b.Systems.AccountRules)

	t.Setenv("APP_HYPERSCALER_ACCOUNT_POOL_SOURCE", "list")
	cfg, err = Load()
	require.NoError(t, err)
	b, err = cfg.Build()
	require.NoError(t, err)
	assert.IsType(t, hyperscaler.List{}, b.Systems.AccountPool)
}
