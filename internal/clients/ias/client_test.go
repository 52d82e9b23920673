package ias_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit/clientkittest"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/ias"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/iasstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type env struct {
	sb  *sandbox.Sandbox
	st  *iasstandin.StandIn
	cfg ias.Config
}

func newEnv(t *testing.T, seed uint64) *env {
	t.Helper()
	st := iasstandin.New(iasstandin.Options{User: "keb", Password: "s3cret"})
	sb, base := sandboxtest.Serve(t, sandbox.Options{Seed: seed}, st)
	return &env{sb: sb, st: st, cfg: ias.Config{
		URL:                 base + "/ias",
		UserID:              "keb",
		Password:            "s3cret",
		IdentityProvider:    iasstandin.DefaultIdentityProviders[0].Name,
		Timeout:             2 * time.Second,
		RetryInitialBackoff: 2 * time.Millisecond,
		RetryMaxBackoff:     20 * time.Millisecond,
	}}
}

func (e *env) client(t *testing.T) *ias.Client { return sandboxtest.NewClient(t, ias.New, e.cfg) }

// listed returns the service provider of the name as the company lists it.
func (e *env) listed(t *testing.T, name string) iasstandin.Object {
	t.Helper()
	for _, sp := range e.st.Snapshot().ServiceProviders {
		if sp.Name == name {
			return sp
		}
	}
	t.Fatalf("no service provider %q", name)
	return iasstandin.Object{}
}

func TestConfigFromEnvironment(t *testing.T) {
	t.Setenv("APP_IAS_URL", "https://ias.example")
	t.Setenv("APP_IAS_USER_ID", "user")
	t.Setenv("APP_IAS_PASSWORD", "pw")
	t.Setenv("APP_IAS_IDENTITY_PROVIDER", "idp")
	var cfg ias.Config
	require.NoError(t, envconfig.Process("APP", &cfg))
	assert.Equal(t, ias.Config{URL: "https://ias.example", UserID: "user", Password: "pw", IdentityProvider: "idp",
		Timeout: 10 * time.Second, Config: clientkit.Config{Calls: clientkittest.DefaultCalls}, RetryInitialBackoff: 200 * time.Millisecond, RetryMaxBackoff: 10 * time.Second}, cfg)
	require.NoError(t, cfg.Validate())

	t.Setenv("APP_IAS_DISABLED", "true")
	var disabled ias.Config
	require.NoError(t, envconfig.Process("APP", &disabled))
	assert.True(t, disabled.Disabled)
	_, err := ias.New(disabled)
	assert.ErrorIs(t, err, ias.ErrDisabled)
	assert.NoError(t, ias.Config{Disabled: true}.Validate(), "nothing is required when disabled")

	_, err = ias.New(ias.Config{URL: "ias.example"})
	assert.ErrorContains(t, err, "APP_IAS_URL must be an absolute http(s) URL")
	assert.ErrorContains(t, err, "APP_IAS_USER_ID is required")
	assert.ErrorContains(t, err, "APP_IAS_PASSWORD is required")
}

func TestServiceProviderFlow(t *testing.T) {
	e := newEnv(t, 1)
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)

	sp, err := c.CreateServiceProvider(ctx, "rt-1")
	require.NoError(t, err)
	assert.NotEmpty(t, sp.ID)
	assert.Equal(t, "rt-1", sp.Name)
	assert.True(t, sp.Created)

	again, err := c.CreateServiceProvider(ctx, "rt-1")
	require.NoError(t, err)
	assert.Equal(t, sp.ID, again.ID, "an existing service provider of the same name is returned")
	assert.False(t, again.Created)
	assert.Equal(t, ias.SSOTypeSAML2, again.SSOType, "as IAS lists it")
	found, ok, err := c.FindServiceProvider(ctx, "rt-1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, sp.ID, found.ID)
	_, ok, err = c.FindServiceProvider(ctx, "rt")
	require.NoError(t, err)
	assert.False(t, ok, "names match exactly")

	uris := []string{"https://grafana.rt-1.example/login/generic_oauth"}
	require.NoError(t, c.ConfigureOIDC(ctx, sp.ID, uris))
	require.NoError(t, c.ConfigureOIDC(ctx, sp.ID, uris), "configuring twice")
	got := e.listed(t, "rt-1")
	assert.Equal(t, iasstandin.SSOTypeOpenIDConnect, got.SSOType)
	assert.Equal(t, uris, got.RedirectURIs)
	assert.Equal(t, ias.SubjectNameIdentifier, got.NameIDAttribute)
	var attrs []ias.AssertionAttribute
	for _, a := range got.AssertionAttributes {
		attrs = append(attrs, ias.AssertionAttribute{AssertionAttribute: a.AssertionAttribute, UserAttribute: a.UserAttribute})
	}
	assert.Equal(t, ias.AssertionAttributes, attrs)
	assert.Equal(t, &iasstandin.DefaultIdentityProviders[0], got.AuthenticatingIdp)
	assert.Equal(t, "Deny", got.RBAConfig.DefaultAction)
	assert.Equal(t, []iasstandin.RBARule{{Action: "Allow", Group: "skr-monitoring-admin", GroupType: "Cloud"},
		{Action: "Allow", Group: "skr-monitoring-viewer", GroupType: "Cloud"}}, got.RBAConfig.RBARules)

	clientID, secret, err := c.GenerateSecret(ctx, sp.ID)
	require.NoError(t, err)
	assert.Equal(t, got.UserForRest, clientID, "the client id is the service provider's userForRest")
	assert.True(t, e.st.HasSecret(clientID, secret))
	_, secret2, err := c.GenerateSecret(ctx, sp.ID)
	require.NoError(t, err)
	assert.NotEqual(t, secret, secret2, "a new secret on every call")
	assert.False(t, e.st.HasSecret(clientID, secret), "the new secret replaces the earlier one")
	assert.True(t, e.st.HasSecret(clientID, secret2))
	assert.Len(t, e.listed(t, "rt-1").ClientSecrets, 1)

	require.NoError(t, c.DeleteServiceProvider(ctx, sp.ID))
	require.NoError(t, c.DeleteServiceProvider(ctx, sp.ID), "deleting a missing service provider succeeds")
	assert.False(t, e.st.HasSecret(clientID, secret2))
	_, _, err = c.GenerateSecret(ctx, sp.ID)
	require.Error(t, err)
	assert.False(t, ias.IsTemporary(err))
	assert.ErrorContains(t, err, fmt.Sprintf("generating a client secret for IAS service provider %q", sp.ID))

	snap := e.st.Snapshot()
	assert.Empty(t, snap.ServiceProviders)
	assert.Equal(t, map[string]int{"rt-1": 1}, snap.CreatesByName)
	assert.Equal(t, map[string]int{"rt-1": 1}, snap.DeletesByName)
}

// The first secret of a service provider just created is generated without a deletion first;
// lost answers still leave exactly one valid secret.
func TestGenerateFirstSecret(t *testing.T) {
	e := newEnv(t, 3)
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)
	sp, err := c.CreateServiceProvider(ctx, "rt-first")
	require.NoError(t, err)
	before, err := e.sb.Stats("ias")
	require.NoError(t, err)
	clientID, secret, err := c.GenerateFirstSecret(ctx, sp.ID)
	require.NoError(t, err)
	after, err := e.sb.Stats("ias")
	require.NoError(t, err)
	assert.Equal(t, 1, after.Requests-before.Requests, "one request")
	assert.True(t, e.st.HasSecret(clientID, secret))

	e.cfg.Calls.Attempts, e.cfg.Calls.BreakerThreshold = 100, -1
	c = e.client(t)
	require.NoError(t, e.sb.SetFaults("ias", sandbox.Faults{LostResponseRate: 0.5}))
	for i := range 10 {
		sp, err := c.CreateServiceProvider(ctx, fmt.Sprintf("rt-lost-%d", i))
		require.NoError(t, err)
		clientID, secret, err := c.GenerateFirstSecret(ctx, sp.ID)
		require.NoError(t, err)
		assert.True(t, e.st.HasSecret(clientID, secret))
	}
	require.NoError(t, e.sb.SetFaults("ias", sandbox.Faults{}))
	for _, sp := range e.st.Snapshot().ServiceProviders {
		assert.Equal(t, 1, sp.Secrets, "exactly one valid secret for %s", sp.Name)
	}
	st, err := e.sb.Stats("ias")
	require.NoError(t, err)
	assert.Positive(t, st.LostResponses)
}

func TestIdentityProviderIsOptional(t *testing.T) {
	e := newEnv(t, 7)
	e.cfg.IdentityProvider = ""
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)
	sp, err := c.CreateServiceProvider(ctx, "rt-no-idp")
	require.NoError(t, err)
	require.NoError(t, c.ConfigureOIDC(ctx, sp.ID, nil))
	got := e.listed(t, "rt-no-idp")
	assert.Nil(t, got.AuthenticatingIdp)
	assert.Empty(t, got.RedirectURIs)
	assert.Equal(t, ias.SSOTypeOpenIDConnect, got.SSOType)
}

func TestIdempotentCreateUnderInjectedErrors(t *testing.T) {
	e := newEnv(t, 2026)
	// Every call tries up to 100 times, as the step's durable retries would; the breaker is off, so
	// that a run of injected failures does not stop the calls this test makes.
	e.cfg.Calls.Attempts, e.cfg.Calls.BreakerThreshold = 100, -1
	require.NoError(t, e.sb.SetFaults("ias", sandbox.Faults{ErrorRate: 0.3, LostResponseRate: 0.3}))
	c := e.client(t)
	ctx := sandboxtest.Context(t, 60*time.Second)

	ids := map[string]string{}
	for i := range 30 {
		name := fmt.Sprintf("runtime-%02d", i)
		sp, err := c.CreateServiceProvider(ctx, name)
		require.NoError(t, err, name)
		assert.Equal(t, name, sp.Name)
		ids[sp.ID] = name
	}
	assert.Len(t, ids, 30)

	snap := e.st.Snapshot()
	assert.Len(t, snap.ServiceProviders, 30)
	assert.Len(t, snap.CreatesByName, 30)
	for name, n := range snap.CreatesByName {
		assert.Equal(t, 1, n, name)
	}
	st, err := e.sb.Stats("ias")
	require.NoError(t, err)
	assert.Greater(t, st.Errors500+st.Errors503, 10, "the retries were exercised: %+v", st)

	// the rest of the flow and deletion under the same faults
	for id := range ids {
		require.NoError(t, c.ConfigureOIDC(ctx, id, []string{"https://x.example/cb"}))
		clientID, secret, err := c.GenerateSecret(ctx, id)
		require.NoError(t, err)
		assert.True(t, e.st.HasSecret(clientID, secret))
	}
	// an answer lost after IAS generated a secret leaves no second one behind
	snap = e.st.Snapshot()
	for _, sp := range snap.ServiceProviders {
		assert.Equal(t, 1, sp.Secrets, "exactly one valid secret for %s", sp.Name)
	}
	for id := range ids {
		require.NoError(t, c.DeleteServiceProvider(ctx, id))
	}
	snap = e.st.Snapshot()
	assert.Empty(t, snap.ServiceProviders)
	for name, n := range snap.DeletesByName {
		assert.Equal(t, 1, n, name)
	}
}

func TestPermanentFailuresAreNotRetried(t *testing.T) {
	e := newEnv(t, 3)
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)
	sp, err := c.CreateServiceProvider(ctx, "rt-4xx")
	require.NoError(t, err)

	err = c.ConfigureOIDC(ctx, sp.ID, []string{"not a url"})
	require.Error(t, err)
	assert.False(t, ias.IsTemporary(err))
	var ie *ias.Error
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, http.StatusBadRequest, ie.StatusCode)
	assert.Equal(t, 1, ie.Attempts)
	assert.ErrorContains(t, err, fmt.Sprintf("configuring OpenID Connect for IAS service provider %q", sp.ID))
	assert.ErrorContains(t, err, "is not an absolute http(s) URL")
	snap := e.st.Snapshot()
	assert.Equal(t, 1, snap.Calls["configure"])
	assert.Zero(t, snap.Calls["rba"], "nothing after a failed configuration")

	err = c.ConfigureOIDC(ctx, "missing", nil)
	assert.True(t, ias.IsNotFound(err))
	assert.False(t, ias.IsTemporary(err))
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, 1, ie.Attempts)

	long := make([]byte, 300)
	for i := range long {
		long[i] = 'x'
	}
	_, err = c.CreateServiceProvider(ctx, string(long))
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, http.StatusBadRequest, ie.StatusCode)
	assert.Equal(t, 1, ie.Attempts)

	for _, err := range []error{
		func() error { _, err := c.CreateServiceProvider(ctx, " "); return err }(),
		func() error { _, _, err := c.GenerateSecret(ctx, ""); return err }(),
		c.DeleteServiceProvider(ctx, ""),
	} {
		require.Error(t, err)
		assert.False(t, ias.IsTemporary(err))
	}
	assert.Equal(t, 2, e.st.Snapshot().Calls["create"], "empty names and ids never reach IAS")
}

func TestWrongCredentialsArePermanent(t *testing.T) {
	e := newEnv(t, 8)
	e.cfg.Password = "wrong"
	c := e.client(t)
	_, err := c.CreateServiceProvider(sandboxtest.Context(t, 10*time.Second), "rt-denied")
	require.Error(t, err)
	assert.False(t, ias.IsTemporary(err))
	var ie *ias.Error
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, http.StatusUnauthorized, ie.StatusCode)
	assert.Equal(t, 1, ie.Attempts)
	snap := e.st.Snapshot()
	assert.Equal(t, 1, snap.Calls["unauthorized"])
	assert.Empty(t, snap.CreatesByName)
}

func TestOutageLongerThanDeadlineIsTemporary(t *testing.T) {
	e := newEnv(t, 4)
	sandboxtest.Outage(t, e.sb, "ias")
	c := e.client(t)

	start := time.Now()
	_, err := c.CreateServiceProvider(sandboxtest.Context(t, 300*time.Millisecond), "rt-outage")
	clientkittest.RequireGaveUp(t, err, start, 3)
	assert.True(t, ias.IsTemporary(err), "%v", err)
	assert.Empty(t, e.st.Snapshot().CreatesByName)

	// once the outage is over the same call succeeds
	require.NoError(t, e.sb.SetFaults("ias", sandbox.Faults{}))
	_, err = c.CreateServiceProvider(sandboxtest.Context(t, 5*time.Second), "rt-outage")
	require.NoError(t, err)
	assert.Equal(t, 1, e.st.Snapshot().CreatesByName["rt-outage"])
}

func TestLatencyBeyondRequestTimeoutIsRetried(t *testing.T) {
	e := newEnv(t, 5)
	require.NoError(t, e.sb.SetFaults("ias", sandbox.Faults{Latency: time.Second}))
	e.cfg.Timeout = 100 * time.Millisecond
	c := e.client(t)
	_, _, err := c.FindServiceProvider(sandboxtest.Context(t, 500*time.Millisecond), "rt")
	require.Error(t, err)
	assert.True(t, ias.IsTemporary(err), "%v", err)
	var ie *ias.Error
	require.ErrorAs(t, err, &ie)
	assert.Greater(t, ie.Attempts, 1)
}

func TestNetworkErrorsAreTemporary(t *testing.T) {
	addr := sandboxtest.ClosedAddr(t)

	c, err := ias.New(ias.Config{URL: "http://" + addr, UserID: "x", Password: "y",
		RetryInitialBackoff: time.Millisecond, RetryMaxBackoff: 5 * time.Millisecond})
	require.NoError(t, err)
	err = c.DeleteServiceProvider(sandboxtest.Context(t, 100*time.Millisecond), "sp-1")
	require.Error(t, err)
	assert.True(t, ias.IsTemporary(err), "%v", err)
	assert.ErrorContains(t, err, "after 3 attempt(s)", "bounded by its attempts, not by the deadline")
	assert.ErrorContains(t, err, `deleting IAS service provider "sp-1"`)
}

// Two actors create the same service provider at once (a replica paused past its operation's
// lease and the one that took the operation over): both look the name up before either creates,
// both create, and both settle on the same provider; the other is deleted, and neither reports
// a provider with no secrets to revoke (Created) when another actor made one beside it.
func TestTwoActorsSettleOnOneServiceProvider(t *testing.T) {
	e := newEnv(t, 7)
	// Both look-ups before either creation.
	require.NoError(t, e.sb.SetFaults("ias", sandbox.Faults{Latency: 100 * time.Millisecond}))
	c := e.client(t)
	ctx := sandboxtest.Context(t, 60*time.Second)
	const names = 8
	type result struct {
		sp  *ias.ServiceProvider
		err error
	}
	got := make([][2]result, names)
	var wg sync.WaitGroup
	for i := range names {
		for a := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sp, err := c.CreateServiceProvider(ctx, fmt.Sprintf("runtime-%02d", i))
				got[i][a] = result{sp, err}
			}()
		}
	}
	wg.Wait()
	snap := e.st.Snapshot()
	assert.Len(t, snap.ServiceProviders, names, "one per name")
	raced := 0
	for i, pair := range got {
		require.NoError(t, pair[0].err)
		require.NoError(t, pair[1].err)
		assert.Equal(t, pair[0].sp.ID, pair[1].sp.ID, "runtime-%02d: both actors keep the same one", i)
		if snap.CreatesByName[fmt.Sprintf("runtime-%02d", i)] > 1 {
			raced++
			assert.False(t, pair[0].sp.Created && pair[1].sp.Created, "runtime-%02d: not both Created", i)
		}
	}
	assert.Positive(t, raced, "the actors raced: %v", snap.CreatesByName)
}
