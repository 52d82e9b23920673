package edp_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit/clientkittest"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/edp"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/edpstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const namespace = "kyma-dev"

type env struct {
	sb  *sandbox.Sandbox
	st  *edpstandin.StandIn
	cfg edp.Config
}

func newEnv(t *testing.T, seed uint64) *env {
	return newEnvWithClock(t, seed, time.Now)
}

func newEnvWithClock(t *testing.T, seed uint64, now func() time.Time) *env {
	t.Helper()
	st := edpstandin.New(edpstandin.Options{ClientID: "keb", ClientSecret: "s3cret", Namespaces: []string{namespace}, Now: now})
	sb, base := sandboxtest.Serve(t, sandbox.Options{Seed: seed}, st)
	return &env{sb: sb, st: st, cfg: edp.Config{
		URL:                 base + "/edp",
		OAuthURL:            base + "/edp/oauth/token",
		ClientID:            "keb",
		ClientSecret:        "s3cret",
		Namespace:           namespace,
		Timeout:             2 * time.Second,
		RetryInitialBackoff: 2 * time.Millisecond,
		RetryMaxBackoff:     20 * time.Millisecond,
	}}
}

func (e *env) client(t *testing.T) *edp.Client { return sandboxtest.NewClient(t, edp.New, e.cfg) }

// metadata is a runtime's metadata as the registration step writes it.
func metadata(subaccountID string) map[string]string {
	return map[string]string{edp.MaasConsumerEnvironmentKey: edp.EnvironmentCF, edp.MaasConsumerRegionKey: "cf-eu10",
		edp.MaasConsumerSubAccountKey: subaccountID, edp.MaasConsumerServicePlanKey: edp.ServicePlanStandard}
}

func tenantKey(subaccountID string) string { return namespace + "/" + subaccountID + "/prod" }

func TestConfigFromEnvironment(t *testing.T) {
	t.Setenv("APP_EDP_URL", "https://edp.example")
	t.Setenv("APP_EDP_OAUTH_URL", "https://edp.example/oauth/token")
	t.Setenv("APP_EDP_CLIENT_ID", "id")
	t.Setenv("APP_EDP_CLIENT_SECRET", "secret")
	t.Setenv("APP_EDP_NAMESPACE", "kyma")
	var cfg edp.Config
	require.NoError(t, envconfig.Process("APP", &cfg))
	assert.Equal(t, edp.Config{URL: "https://edp.example", OAuthURL: "https://edp.example/oauth/token", ClientID: "id",
		ClientSecret: "secret", Namespace: "kyma", Environment: "prod", Timeout: 10 * time.Second, Config: clientkit.Config{Calls: clientkittest.DefaultCalls},
		RetryInitialBackoff: 200 * time.Millisecond, RetryMaxBackoff: 10 * time.Second}, cfg)
	require.NoError(t, cfg.Validate())

	t.Setenv("APP_EDP_ENVIRONMENT", "dev")
	t.Setenv("APP_EDP_DISABLED", "true")
	require.NoError(t, envconfig.Process("APP", &cfg))
	assert.Equal(t, "dev", cfg.Environment)
	assert.True(t, cfg.Disabled)

	_, err := edp.New(edp.Config{URL: "edp.example"})
	assert.ErrorContains(t, err, "APP_EDP_URL must be an absolute http(s) URL")
	assert.ErrorContains(t, err, "APP_EDP_OAUTH_URL is required")
	assert.ErrorContains(t, err, "APP_EDP_CLIENT_ID is required")
	assert.ErrorContains(t, err, "APP_EDP_NAMESPACE is required")

	disabled := edp.Config{Disabled: true}
	assert.NoError(t, disabled.Validate(), "nothing is required when EDP is disabled")
	_, err = edp.New(disabled)
	assert.ErrorContains(t, err, "EDP is disabled")

	e := newEnv(t, 0)
	assert.Equal(t, "prod", e.client(t).Config().Environment, "the default environment")
}

func TestRegisterAndDeregister(t *testing.T) {
	e := newEnv(t, 1)
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)

	require.NoError(t, c.RegisterRuntime(ctx, "sa-1", metadata("sa-1")))
	dt, err := c.GetDataTenant(ctx, "sa-1")
	require.NoError(t, err)
	assert.Equal(t, &edp.DataTenant{Namespace: edp.Namespace{Name: namespace}, Name: "sa-1", Environment: "prod"}, dt)
	md, err := c.GetMetadata(ctx, "sa-1")
	require.NoError(t, err)
	assert.Equal(t, metadata("sa-1"), md)

	snap := e.st.Snapshot()
	require.Len(t, snap.DataTenants, 1)
	assert.Equal(t, metadata("sa-1"), snap.DataTenants[0].Metadata)
	assert.Equal(t, map[string]int{tenantKey("sa-1"): 1}, snap.CreatesByTenant)

	require.NoError(t, c.DeregisterRuntime(ctx, "sa-1"))
	snap = e.st.Snapshot()
	assert.Empty(t, snap.DataTenants)
	assert.Equal(t, 4, snap.Calls["metadata.delete"], "metadata keys are deleted first")
	assert.Equal(t, map[string]int{tenantKey("sa-1"): 1}, snap.DeletesByTenant)

	_, err = c.GetDataTenant(ctx, "sa-1")
	require.Error(t, err)
	assert.True(t, edp.IsNotFound(err))
	assert.False(t, edp.IsTemporary(err))
	assert.ErrorContains(t, err, `getting EDP data tenant "sa-1/prod"`)
	_, err = c.GetMetadata(ctx, "sa-1")
	assert.True(t, edp.IsNotFound(err))

	require.NoError(t, c.DeregisterRuntime(ctx, "sa-1"), "deregistering a missing runtime succeeds")
	require.NoError(t, c.DeregisterRuntime(ctx, "never-registered"))
	assert.Equal(t, 1, e.st.Snapshot().Calls["delete"])
	assert.Equal(t, 1, e.st.Snapshot().Calls["token"], "the token is reused")
}

func TestRegisterIsIdempotent(t *testing.T) {
	e := newEnv(t, 2)
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)

	require.NoError(t, c.RegisterRuntime(ctx, "sa-1", map[string]string{"plan": "azure", "region": "westeurope"}))
	require.NoError(t, c.RegisterRuntime(ctx, "sa-1", map[string]string{"plan": "aws", "serviceID": "svc"}))
	snap := e.st.Snapshot()
	require.Len(t, snap.DataTenants, 1)
	assert.Equal(t, map[string]string{"plan": "aws", "region": "westeurope", "serviceID": "svc"}, snap.DataTenants[0].Metadata,
		"values are replaced, other keys left alone")
	assert.Equal(t, map[string]int{tenantKey("sa-1"): 1}, snap.CreatesByTenant)
	assert.Equal(t, 2, snap.DataTenants[0].Calls["create"], "the second create was answered 409")

	require.NoError(t, c.RegisterRuntime(ctx, "sa-2", nil), "no metadata")
	assert.Len(t, e.st.Snapshot().DataTenants, 2)
}

func TestRegistrationsUnderInjectedErrors(t *testing.T) {
	e := newEnv(t, 2026)
	// Every call tries up to 100 times, as the step's durable retries would; the breaker is off, so
	// that a run of injected failures does not stop the calls this test makes.
	e.cfg.Calls.Attempts, e.cfg.Calls.BreakerThreshold = 100, -1
	require.NoError(t, e.sb.SetFaults(edpstandin.Name, sandbox.Faults{ErrorRate: 0.3, LostResponseRate: 0.3}))
	c := e.client(t)
	ctx := sandboxtest.Context(t, 60*time.Second)

	const n = 30
	for i := range n {
		sa := fmt.Sprintf("subaccount-%02d", i)
		require.NoError(t, c.RegisterRuntime(ctx, sa, metadata(sa)), sa)
	}
	snap := e.st.Snapshot()
	require.Len(t, snap.DataTenants, n)
	for _, dt := range snap.DataTenants {
		assert.Equal(t, metadata(dt.Name), dt.Metadata, dt.Name)
	}
	require.Len(t, snap.CreatesByTenant, n)
	for k, v := range snap.CreatesByTenant {
		assert.Equal(t, 1, v, k)
	}
	st, err := e.sb.Stats(edpstandin.Name)
	require.NoError(t, err)
	assert.Greater(t, st.Errors500+st.Errors503, 20, "the retries were exercised: %+v", st)

	// deregistering them all under the same faults leaves nothing
	for i := range n {
		require.NoError(t, c.DeregisterRuntime(ctx, fmt.Sprintf("subaccount-%02d", i)))
	}
	snap = e.st.Snapshot()
	assert.Empty(t, snap.DataTenants)
	require.Len(t, snap.DeletesByTenant, n)
	for k, v := range snap.DeletesByTenant {
		assert.Equal(t, 1, v, k)
	}
}

func TestPermanentFailuresAreNotRetried(t *testing.T) {
	e := newEnv(t, 3)
	ctx := sandboxtest.Context(t, 10*time.Second)

	e.cfg.Namespace = "unknown"
	wrongNS := e.client(t)
	err := wrongNS.RegisterRuntime(ctx, "sa-1", metadata("sa-1"))
	require.Error(t, err)
	assert.False(t, edp.IsTemporary(err))
	assert.True(t, edp.IsNotFound(err))
	var ee *edp.Error
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, http.StatusNotFound, ee.StatusCode)
	assert.Equal(t, 1, ee.Attempts)
	assert.ErrorContains(t, err, `creating EDP data tenant "sa-1/prod"`)
	assert.ErrorContains(t, err, `namespace \"unknown\" not found`)
	assert.Equal(t, 1, e.st.Snapshot().Calls["create"])

	e.cfg.Namespace = namespace
	e.cfg.ClientSecret = "wrong"
	wrong := e.client(t)
	err = wrong.RegisterRuntime(ctx, "sa-1", nil)
	require.ErrorAs(t, err, &ee)
	assert.False(t, edp.IsTemporary(err))
	assert.Equal(t, http.StatusUnauthorized, ee.StatusCode)
	assert.Equal(t, 1, ee.Attempts)
	assert.Equal(t, 1, e.st.Snapshot().Calls["token.rejected"])

	e.cfg.ClientSecret = "s3cret"
	c := e.client(t)
	for _, err := range []error{
		c.RegisterRuntime(ctx, "", nil),
		c.RegisterRuntime(ctx, "a/b", nil),
		c.RegisterRuntime(ctx, "sa-1", map[string]string{"": "x"}),
		c.DeregisterRuntime(ctx, " "),
	} {
		require.Error(t, err)
		assert.False(t, edp.IsTemporary(err), "%v", err)
	}
	snap := e.st.Snapshot()
	assert.Empty(t, snap.DataTenants)
	assert.Equal(t, 1, snap.Calls["create"], "invalid input is refused before calling EDP")
}

func TestOutageLongerThanDeadlineIsTemporary(t *testing.T) {
	e := newEnv(t, 4)
	sandboxtest.Outage(t, e.sb, edpstandin.Name)
	c := e.client(t)

	for name, call := range map[string]func(context.Context) error{
		"register":   func(ctx context.Context) error { return c.RegisterRuntime(ctx, "sa-outage", metadata("sa-outage")) },
		"deregister": func(ctx context.Context) error { return c.DeregisterRuntime(ctx, "sa-outage") },
	} {
		start := time.Now()
		err := call(sandboxtest.Context(t, 300*time.Millisecond))
		clientkittest.RequireGaveUp(t, err, start, 3, name)
		assert.True(t, edp.IsTemporary(err), "%s: %v", name, err)
	}
	assert.Empty(t, e.st.Snapshot().DataTenants)

	// once the outage is over the same call succeeds
	require.NoError(t, e.sb.SetFaults(edpstandin.Name, sandbox.Faults{}))
	require.NoError(t, c.RegisterRuntime(sandboxtest.Context(t, 5*time.Second), "sa-outage", metadata("sa-outage")))
	assert.Equal(t, 1, e.st.Snapshot().CreatesByTenant[tenantKey("sa-outage")])
}

func TestRejectedTokenIsReplaced(t *testing.T) {
	clock := sandboxtest.NewWallClock()
	e := newEnvWithClock(t, 6, clock.Now)
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)
	require.NoError(t, c.RegisterRuntime(ctx, "sa-1", nil))

	// EDP now considers the cached token expired while the client does not
	clock.Advance(2 * time.Hour)
	_, err := c.GetDataTenant(ctx, "sa-1")
	require.NoError(t, err)
	snap := e.st.Snapshot()
	assert.Equal(t, 2, snap.Calls["token"])
	assert.Equal(t, 1, snap.Calls["unauthorized"])
}

func TestNetworkErrorsAreTemporary(t *testing.T) {
	addr := sandboxtest.ClosedAddr(t)

	c, err := edp.New(edp.Config{URL: "http://" + addr, OAuthURL: "http://" + addr + "/oauth/token", ClientID: "x",
		Namespace: namespace, RetryInitialBackoff: time.Millisecond, RetryMaxBackoff: 5 * time.Millisecond})
	require.NoError(t, err)
	err = c.DeregisterRuntime(sandboxtest.Context(t, 100*time.Millisecond), "sa-1")
	require.Error(t, err)
	assert.True(t, edp.IsTemporary(err), "%v", err)
	assert.ErrorContains(t, err, "after 3 attempt(s)", "bounded by its attempts, not by the deadline")
	assert.ErrorContains(t, err, `listing metadata of EDP data tenant "sa-1/prod"`)
}
