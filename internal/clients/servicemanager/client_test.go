package servicemanager_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit/clientkittest"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/servicemanager"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/smstandin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type env struct {
	sb    *sandbox.Sandbox
	st    *smstandin.Server
	cfg   servicemanager.Config
	creds servicemanager.Credentials
	clock *sandboxtest.Clock
}

func newEnv(t *testing.T, seed uint64, delay time.Duration) *env {
	t.Helper()
	e := &env{clock: sandboxtest.NewClock(time.Now())}
	e.st = smstandin.New(smstandin.Options{ClientID: "keb", ClientSecret: "s3cret", ProvisionDelay: delay, Now: e.clock.Now})
	var base string
	e.sb, base = sandboxtest.Serve(t, sandbox.Options{Seed: seed}, e.st)
	base += "/" + smstandin.Name
	e.creds = servicemanager.Credentials{ClientID: "keb", ClientSecret: "s3cret", URL: base, TokenURL: base}
	e.cfg = servicemanager.Config{URL: base, TokenURL: base, ClientID: "keb", ClientSecret: "s3cret",
		Timeout: 2 * time.Second, RetryInitialBackoff: 2 * time.Millisecond, RetryMaxBackoff: 20 * time.Millisecond}
	return e
}

func (e *env) client(t *testing.T) *servicemanager.Client {
	return sandboxtest.NewClient(t, servicemanager.New, e.cfg)
}

func emsRequest(name string) servicemanager.InstanceRequest {
	return servicemanager.InstanceRequest{Name: name, OfferingName: "enterprise-messaging", PlanName: "default",
		Parameters: map[string]any{"emname": name, "namespace": "default/sap.kyma/" + name},
		Labels:     map[string][]string{"runtime_id": {name}}}
}

func TestConfigFromEnvironment(t *testing.T) {
	var cfg servicemanager.Config
	require.NoError(t, envconfig.Process("APP", &cfg))
	assert.Equal(t, servicemanager.Config{Timeout: 10 * time.Second, Config: clientkit.Config{Calls: clientkittest.DefaultCalls}, RetryInitialBackoff: 200 * time.Millisecond,
		RetryMaxBackoff: 10 * time.Second, PlanCacheTTL: 5 * time.Minute}, cfg, "everything is optional")
	c, err := servicemanager.New(cfg)
	require.NoError(t, err)
	_, ok := c.DefaultCredentials()
	assert.False(t, ok)

	t.Setenv("APP_SERVICE_MANAGER_URL", "https://service-manager.example")
	t.Setenv("APP_SERVICE_MANAGER_TOKEN_URL", "https://uaa.example")
	t.Setenv("APP_SERVICE_MANAGER_CLIENT_ID", "id")
	t.Setenv("APP_SERVICE_MANAGER_CLIENT_SECRET", "secret")
	t.Setenv("APP_SERVICE_MANAGER_TIMEOUT", "5s")
	require.NoError(t, envconfig.Process("APP", &cfg))
	assert.Equal(t, servicemanager.Config{URL: "https://service-manager.example", TokenURL: "https://uaa.example",
		ClientID: "id", ClientSecret: "secret", Timeout: 5 * time.Second, Config: clientkit.Config{Calls: clientkittest.DefaultCalls}, RetryInitialBackoff: 200 * time.Millisecond,
		RetryMaxBackoff: 10 * time.Second, PlanCacheTTL: 5 * time.Minute}, cfg)
	c, err = servicemanager.New(cfg)
	require.NoError(t, err)
	creds, ok := c.DefaultCredentials()
	assert.True(t, ok)
	assert.Equal(t, servicemanager.Credentials{ClientID: "id", ClientSecret: "secret", URL: "https://service-manager.example",
		TokenURL: "https://uaa.example"}, creds)

	_, err = servicemanager.New(servicemanager.Config{ClientSecret: "half", TokenURL: "uaa.example"})
	assert.ErrorContains(t, err, "APP_SERVICE_MANAGER_URL is required")
	assert.ErrorContains(t, err, "APP_SERVICE_MANAGER_TOKEN_URL must be an absolute http(s) URL")
	assert.ErrorContains(t, err, "APP_SERVICE_MANAGER_CLIENT_ID is required")
}

func TestProvisionBindDeprovision(t *testing.T) {
	e := newEnv(t, 1, time.Minute)
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)
	creds, ok := c.DefaultCredentials()
	require.True(t, ok)

	inst, err := c.ProvisionInstance(ctx, creds, emsRequest("ems-1"))
	require.NoError(t, err)
	assert.NotEmpty(t, inst.ID)
	assert.Equal(t, "ems-1", inst.Name)
	assert.Equal(t, "0e4d7b2c-5a61-4f0e-9a3e-000000000a01", inst.ServicePlanID)
	assert.False(t, inst.Ready)
	require.NotNil(t, inst.LastOperation)
	assert.Equal(t, servicemanager.OperationCreate, inst.LastOperation.Type)
	assert.Equal(t, servicemanager.StateInProgress, inst.LastOperation.State)

	again, err := c.ProvisionInstance(ctx, creds, emsRequest("ems-1"))
	require.NoError(t, err)
	assert.Equal(t, inst.ID, again.ID, "an existing instance of the same name is returned")

	_, err = c.Bind(ctx, creds, servicemanager.BindingRequest{Name: "ems-1", InstanceID: inst.ID})
	require.Error(t, err, "an instance not ready yet")
	var se *servicemanager.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusUnprocessableEntity, se.StatusCode)
	assert.False(t, servicemanager.IsTemporary(err))

	// deprovisioning during the creation waits for it, as for a transient failure
	err = c.DeprovisionInstance(sandboxtest.Context(t, 100*time.Millisecond), creds, inst.ID)
	require.Error(t, err)
	assert.True(t, servicemanager.IsTemporary(err), "%v", err)
	assert.ErrorContains(t, err, "create operation is still in progress")

	e.clock.Advance(time.Minute)
	got, err := c.GetInstance(ctx, creds, inst.ID)
	require.NoError(t, err)
	assert.True(t, got.Ready)
	assert.Equal(t, servicemanager.StateSucceeded, got.LastOperation.State)

	b, err := c.Bind(ctx, creds, servicemanager.BindingRequest{Name: "ems-1", InstanceID: inst.ID, Parameters: map[string]any{"x": 1}})
	require.NoError(t, err)
	assert.Equal(t, "ems-1", b.Name)
	assert.Equal(t, inst.ID, b.InstanceID)
	assert.Equal(t, "default/sap.kyma/ems-1", b.Credentials["namespace"])
	assert.Len(t, b.Credentials["messaging"], 3)
	b2, err := c.Bind(ctx, creds, servicemanager.BindingRequest{Name: "ems-1", InstanceID: inst.ID})
	require.NoError(t, err)
	assert.Equal(t, b, b2, "an existing binding of the same name is returned")

	// deprovisioning unbinds first; Service Manager would refuse otherwise
	require.NoError(t, c.DeprovisionInstance(ctx, creds, inst.ID))
	got, err = c.GetInstance(ctx, creds, inst.ID)
	require.NoError(t, err)
	assert.Equal(t, servicemanager.OperationDelete, got.LastOperation.Type)
	assert.Equal(t, servicemanager.StateInProgress, got.LastOperation.State)
	require.NoError(t, c.DeprovisionInstance(ctx, creds, inst.ID), "a deletion in progress counts as done")

	e.clock.Advance(time.Minute)
	_, err = c.GetInstance(ctx, creds, inst.ID)
	require.Error(t, err)
	assert.True(t, servicemanager.IsNotFound(err))
	assert.False(t, servicemanager.IsTemporary(err))
	assert.ErrorContains(t, err, fmt.Sprintf("getting Service Manager instance %q", inst.ID))
	require.NoError(t, c.DeprovisionInstance(ctx, creds, inst.ID), "deprovisioning a missing instance succeeds")
	require.NoError(t, c.Unbind(ctx, creds, b.ID), "unbinding a missing binding succeeds")

	snap := e.st.Snapshot()
	assert.Empty(t, snap.Instances)
	assert.Equal(t, map[string]int{"ems-1": 1}, snap.InstanceCreatesByName)
	assert.Equal(t, map[string]int{"ems-1": 1}, snap.InstanceDeletesByName)
	assert.Equal(t, map[string]int{"ems-1": 1}, snap.BindingCreatesByName)
	assert.Equal(t, map[string]int{"ems-1": 1}, snap.BindingDeletesByName)
	assert.Equal(t, 1, snap.Calls["token"], "the token is reused")
	assert.Equal(t, 1, snap.Calls["deleteInstance"], "no delete is sent during the creation or a deletion")
}

// The offering and plan are read once per credentials while the cache is fresh, and every
// provisioning when it is off.
func TestPlanIDsAreCached(t *testing.T) {
	for _, tc := range []struct {
		ttl     time.Duration
		catalog int
	}{{5 * time.Minute, 2}, {-1, 6}} {
		e := newEnv(t, 1, 0)
		e.cfg.PlanCacheTTL = tc.ttl
		c := e.client(t)
		ctx := sandboxtest.Context(t, 10*time.Second)
		for i := range 3 {
			_, err := c.ProvisionInstance(ctx, e.creds, emsRequest(fmt.Sprintf("ems-%d", i)))
			require.NoError(t, err)
		}
		st, err := e.sb.Stats(smstandin.Name)
		require.NoError(t, err)
		// a token, then per instance its creation and the creation's answer read back
		assert.Equal(t, 1+tc.catalog+3*2, st.Requests, "ttl %v", tc.ttl)
	}
}

func TestIdempotentUnderInjectedErrors(t *testing.T) {
	e := newEnv(t, 2026, 0)
	// Every call tries up to 100 times, as the step's durable retries would; the breaker is off, so
	// that a run of injected failures does not stop the calls this test makes.
	e.cfg.Calls.Attempts, e.cfg.Calls.BreakerThreshold = 100, -1
	require.NoError(t, e.sb.SetFaults(smstandin.Name, sandbox.Faults{ErrorRate: 0.15, LostResponseRate: 0.3}))
	c := e.client(t)
	ctx := sandboxtest.Context(t, 60*time.Second)

	ids := map[string]string{}
	for i := range 30 {
		name := fmt.Sprintf("ems-%02d", i)
		inst, err := c.ProvisionInstance(ctx, e.creds, emsRequest(name))
		require.NoError(t, err, name)
		assert.Equal(t, name, inst.Name)
		b, err := c.Bind(ctx, e.creds, servicemanager.BindingRequest{Name: name, InstanceID: inst.ID})
		require.NoError(t, err, name)
		assert.Equal(t, inst.ID, b.InstanceID)
		ids[inst.ID] = name
	}
	assert.Len(t, ids, 30)

	snap := e.st.Snapshot()
	assert.Len(t, snap.Instances, 30)
	assert.Len(t, snap.Bindings, 30)
	for name, n := range snap.InstanceCreatesByName {
		assert.Equal(t, 1, n, name)
	}
	for name, n := range snap.BindingCreatesByName {
		assert.Equal(t, 1, n, name)
	}
	st, err := e.sb.Stats(smstandin.Name)
	require.NoError(t, err)
	assert.Greater(t, st.Errors500+st.Errors503, 30, "the retries were exercised: %+v", st)

	for id := range ids {
		require.NoError(t, c.DeprovisionInstance(ctx, e.creds, id))
	}
	snap = e.st.Snapshot()
	assert.Empty(t, snap.Instances)
	assert.Empty(t, snap.Bindings)
	assert.Len(t, snap.InstanceDeletesByName, 30)
	for name, n := range snap.InstanceDeletesByName {
		assert.Equal(t, 1, n, name)
	}
}

func TestPermanentFailuresAreNotRetried(t *testing.T) {
	e := newEnv(t, 3, 0)
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)

	req := emsRequest("ems-x")
	req.OfferingName = "no-such-offering"
	_, err := c.ProvisionInstance(ctx, e.creds, req)
	require.Error(t, err)
	assert.False(t, servicemanager.IsTemporary(err))
	var se *servicemanager.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 1, se.Attempts)
	assert.ErrorContains(t, err, `provisioning Service Manager instance "ems-x"`)
	assert.ErrorContains(t, err, `service offering "no-such-offering" not found`)

	req = emsRequest("ems-x")
	req.PlanName = "premium"
	_, err = c.ProvisionInstance(ctx, e.creds, req)
	assert.ErrorContains(t, err, `plan "premium" of service offering "enterprise-messaging" not found`)
	assert.False(t, servicemanager.IsTemporary(err))

	req = emsRequest("ems-x")
	req.Labels = map[string][]string{"empty": {}}
	_, err = c.ProvisionInstance(ctx, e.creds, req)
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusBadRequest, se.StatusCode)
	assert.Equal(t, 1, se.Attempts)
	assert.ErrorContains(t, err, "labels: label empty has no values")
	assert.Equal(t, 1, e.st.Snapshot().Calls["createInstance"])

	_, err = c.Bind(ctx, e.creds, servicemanager.BindingRequest{Name: "b", InstanceID: "missing"})
	assert.True(t, servicemanager.IsNotFound(err))
	assert.False(t, servicemanager.IsTemporary(err))

	_, err = c.ProvisionInstance(ctx, e.creds, servicemanager.InstanceRequest{})
	require.ErrorAs(t, err, &se)
	assert.False(t, se.Temporary)
	assert.ErrorContains(t, err, "the instance name is empty")
	_, err = c.GetInstance(ctx, servicemanager.Credentials{}, "id")
	assert.ErrorContains(t, err, "the credentials' URL (sm_url) is required")
	assert.Empty(t, e.st.Snapshot().InstanceCreatesByName)

	wrong := e.creds
	wrong.ClientSecret = "wrong"
	_, err = c.GetInstance(ctx, wrong, "id")
	require.ErrorAs(t, err, &se)
	assert.False(t, se.Temporary)
	assert.Equal(t, http.StatusUnauthorized, se.StatusCode)
	assert.Equal(t, 1, se.Attempts)
	assert.Equal(t, 1, e.st.Snapshot().Calls["token.rejected"])
}

func TestOutageLongerThanDeadlineIsTemporary(t *testing.T) {
	e := newEnv(t, 4, 0)
	sandboxtest.Outage(t, e.sb, smstandin.Name)
	c := e.client(t)

	start := time.Now()
	_, err := c.ProvisionInstance(sandboxtest.Context(t, 300*time.Millisecond), e.creds, emsRequest("ems-outage"))
	clientkittest.RequireGaveUp(t, err, start, 3)
	assert.True(t, servicemanager.IsTemporary(err), "%v", err)
	assert.Empty(t, e.st.Snapshot().InstanceCreatesByName)

	require.NoError(t, e.sb.SetFaults(smstandin.Name, sandbox.Faults{}))
	_, err = c.ProvisionInstance(sandboxtest.Context(t, 5*time.Second), e.creds, emsRequest("ems-outage"))
	require.NoError(t, err)
	assert.Equal(t, 1, e.st.Snapshot().InstanceCreatesByName["ems-outage"])
}

func TestTokensPerCredentials(t *testing.T) {
	e := newEnv(t, 5, 0)
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)
	inst, err := c.ProvisionInstance(ctx, e.creds, emsRequest("ems-t"))
	require.NoError(t, err)

	// the same credentials, spelled with a trailing slash, share the token
	same := e.creds
	same.TokenURL += "/"
	same.URL += "/"
	_, err = c.GetInstance(ctx, same, inst.ID)
	require.NoError(t, err)
	assert.Equal(t, 1, e.st.Snapshot().Calls["token"])

	// other credentials fetch their own token and do not spoil the good one
	wrong := e.creds
	wrong.ClientID = "other"
	_, err = c.GetInstance(ctx, wrong, inst.ID)
	assert.False(t, servicemanager.IsTemporary(err))
	_, err = c.GetInstance(ctx, e.creds, inst.ID)
	require.NoError(t, err)
	snap := e.st.Snapshot()
	assert.Equal(t, 2, snap.Calls["token"])
	assert.Equal(t, 1, snap.Calls["token.rejected"])

	// a token Service Manager no longer accepts is replaced once
	e.clock.Advance(2 * time.Hour)
	_, err = c.GetInstance(ctx, e.creds, inst.ID)
	require.NoError(t, err)
	snap = e.st.Snapshot()
	assert.Equal(t, 3, snap.Calls["token"])
	assert.Equal(t, 1, snap.Calls["unauthorized"])
}

func TestNetworkErrorsAreTemporary(t *testing.T) {
	addr := sandboxtest.ClosedAddr(t)

	c, err := servicemanager.New(servicemanager.Config{RetryInitialBackoff: time.Millisecond, RetryMaxBackoff: 5 * time.Millisecond})
	require.NoError(t, err)
	creds := servicemanager.Credentials{ClientID: "x", URL: "http://" + addr, TokenURL: "http://" + addr}
	err = c.DeprovisionInstance(sandboxtest.Context(t, 100*time.Millisecond), creds, "id-1")
	require.Error(t, err)
	assert.True(t, servicemanager.IsTemporary(err), "%v", err)
	assert.ErrorContains(t, err, "after 3 attempt(s)", "bounded by its attempts, not by the deadline")
	assert.ErrorContains(t, err, `deprovisioning Service Manager instance "id-1"`)
}
