package director_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit/clientkittest"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/director"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/compass"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/directorstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	tenant    = "3e64ebae-38b5-46a0-b1ed-9ccee153a0ae"
	connector = "https://connector.sandbox.example/graphql"
)

type env struct {
	sb  *sandbox.Sandbox
	st  *directorstandin.StandIn
	cfg director.Config
}

func newEnv(t *testing.T, seed uint64) *env {
	t.Helper()
	st := directorstandin.New(directorstandin.Options{ClientID: "keb", ClientSecret: "s3cret", ConnectorURL: connector})
	sb, base := sandboxtest.Serve(t, sandbox.Options{Seed: seed}, st)
	return &env{sb: sb, st: st, cfg: director.Config{
		URL:                 base + "/director/graphql",
		OAuthTokenURL:       base + "/director/oauth/token",
		OAuthClientID:       "keb",
		OAuthClientSecret:   "s3cret",
		Timeout:             2 * time.Second,
		RetryInitialBackoff: 2 * time.Millisecond,
		RetryMaxBackoff:     20 * time.Millisecond,
	}}
}

func (e *env) client(t *testing.T) *director.Client {
	return sandboxtest.NewClient(t, director.New, e.cfg)
}

func TestConfigFromEnvironment(t *testing.T) {
	t.Setenv("APP_DIRECTOR_OAUTH_TOKEN_URL", "https://oauth.example/oauth2/token")
	t.Setenv("APP_DIRECTOR_OAUTH_CLIENT_ID", "id")
	t.Setenv("APP_DIRECTOR_OAUTH_CLIENT_SECRET", "secret")
	var cfg director.Config
	require.NoError(t, envconfig.Process("APP", &cfg))
	assert.Equal(t, director.Config{URL: "https://compass-gateway-auth-oauth.kyma.local/director/graphql",
		OAuthTokenURL: "https://oauth.example/oauth2/token", OAuthClientID: "id", OAuthClientSecret: "secret",
		Timeout: 10 * time.Second, Config: clientkit.Config{Calls: clientkittest.DefaultCalls}, RetryInitialBackoff: 200 * time.Millisecond, RetryMaxBackoff: 10 * time.Second}, cfg)
	require.NoError(t, cfg.Validate())

	t.Setenv("APP_DIRECTOR_URL", "https://director.example/graphql")
	t.Setenv("APP_SKIP_DIRECTOR_CERT_VERIFICATION", "true")
	t.Setenv("APP_DIRECTOR_TIMEOUT", "5s")
	require.NoError(t, envconfig.Process("APP", &cfg))
	assert.Equal(t, "https://director.example/graphql", cfg.URL)
	assert.True(t, cfg.SkipCertVerify)
	assert.Equal(t, 5*time.Second, cfg.Timeout)

	_, err := director.New(director.Config{URL: "director.example"})
	assert.ErrorContains(t, err, "APP_DIRECTOR_URL must be an absolute http(s) URL")
	assert.ErrorContains(t, err, "APP_DIRECTOR_OAUTH_TOKEN_URL is required")
	assert.ErrorContains(t, err, "APP_DIRECTOR_OAUTH_CLIENT_ID is required")
}

// A registration with a condition is one look-up and one registration; a runtime found by its
// runtime ID gets the condition when it has another one, and is left alone when it has it.
func TestRegisterWithCondition(t *testing.T) {
	e := newEnv(t, 1)
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)
	requests := func() int {
		st, err := e.sb.Stats(directorstandin.Name)
		require.NoError(t, err)
		return st.Requests
	}
	condition := func(id string) string {
		for _, rt := range e.st.Snapshot().Tenants[tenant] {
			if rt.ID == id {
				return rt.Status.Condition
			}
		}
		t.Fatalf("runtime %s not registered", id)
		return ""
	}

	id, err := c.RegisterRuntime(ctx, tenant, "rt-1", "c-1", compass.ConditionProvisioning, map[string]any{"subaccount": "sub-1"})
	require.NoError(t, err)
	assert.Equal(t, 1+2, requests(), "a token, the look-up and the registration")
	assert.Equal(t, compass.ConditionProvisioning, condition(id))

	before := requests()
	again, err := c.RegisterRuntime(ctx, tenant, "rt-1", "c-1", compass.ConditionProvisioning, nil)
	require.NoError(t, err)
	assert.Equal(t, id, again)
	assert.Equal(t, 1, requests()-before, "found with the condition: the look-up only")

	require.NoError(t, c.SetRuntimeStatusCondition(ctx, tenant, id, compass.ConditionInitial))
	_, err = c.RegisterRuntime(ctx, tenant, "rt-1", "c-1", compass.ConditionProvisioning, nil)
	require.NoError(t, err)
	assert.Equal(t, compass.ConditionProvisioning, condition(id), "found with another condition: set")
	snap := e.st.Snapshot()
	assert.Equal(t, map[string]int{"rt-1": 1}, snap.RegistrationsByRuntimeID)
	assert.Equal(t, map[string]any{director.RuntimeIDLabel: "rt-1", "subaccount": "sub-1"}, snap.Tenants[tenant][0].Labels, "labels kept")

	_, err = c.RegisterRuntime(ctx, tenant, "rt-2", "c-2", "RUNNING", nil)
	assert.ErrorContains(t, err, `unknown status condition "RUNNING"`)
}

func TestRuntimeLifecycle(t *testing.T) {
	e := newEnv(t, 1)
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)

	id, err := c.RegisterRuntime(ctx, tenant, "rt-1", "c-1", "", map[string]any{"subaccount": "sub-1", "global": true})
	require.NoError(t, err)
	again, err := c.RegisterRuntime(ctx, tenant, "rt-1", "c-1", "", nil)
	require.NoError(t, err)
	assert.Equal(t, id, again, "the runtime labelled with the runtime ID is returned")

	_, err = c.GetConsoleURL(ctx, tenant, "rt-1")
	assert.True(t, director.IsNotFound(err), "no console label yet: %v", err)
	assert.False(t, director.IsTemporary(err))

	require.NoError(t, c.SetRuntimeStatusCondition(ctx, tenant, id, compass.ConditionProvisioning))
	require.NoError(t, c.UpdateRuntimeLabels(ctx, tenant, id, map[string]string{
		"gardenerClusterName": "c-1", "gardenerClusterDomain": "c-1.kyma.example", director.ConsoleURLLabel: "https://console.c-1.kyma.example",
	}))
	require.NoError(t, c.SetRuntimeStatusCondition(ctx, tenant, id, compass.ConditionConnected))
	require.NoError(t, c.SetRuntimeStatusCondition(ctx, tenant, id, compass.ConditionConnected), "again: no update")

	url, err := c.GetConsoleURL(ctx, tenant, "rt-1")
	require.NoError(t, err)
	assert.Equal(t, "https://console.c-1.kyma.example", url)

	tok, err := c.RequestOneTimeToken(ctx, tenant, id)
	require.NoError(t, err)
	assert.Equal(t, connector, tok.ConnectorURL)
	assert.NotEmpty(t, tok.Token)
	auths, err := c.SystemAuths(ctx, tenant, id)
	require.NoError(t, err)
	require.Len(t, auths, 1, "the token's system auth")
	tok2, err := c.RequestOneTimeToken(ctx, tenant, id)
	require.NoError(t, err)
	assert.NotEqual(t, tok.Token, tok2.Token)
	auths2, err := c.SystemAuths(ctx, tenant, id)
	require.NoError(t, err)
	require.Len(t, auths2, 1, "a new token revokes the earlier one")
	assert.NotEqual(t, auths, auths2)

	snap := e.st.Snapshot()
	require.Len(t, snap.Tenants[tenant], 1)
	rt := snap.Tenants[tenant][0]
	assert.Equal(t, "c-1", rt.Name)
	assert.Equal(t, map[string]any{director.RuntimeIDLabel: "rt-1", "subaccount": "sub-1", "global": true,
		"gardenerClusterName": "c-1", "gardenerClusterDomain": "c-1.kyma.example", director.ConsoleURLLabel: "https://console.c-1.kyma.example",
	}, rt.Labels, "setting the condition keeps the labels")
	assert.Equal(t, compass.ConditionConnected, rt.Status.Condition)
	assert.Equal(t, 2, rt.TokensIssued)
	assert.Equal(t, 1, rt.ValidTokens)
	assert.Equal(t, 1, rt.Calls["deleteSystemAuthForRuntime"])
	assert.Equal(t, 2, rt.Calls["updateRuntime"], "PROVISIONING and CONNECTED once each")
	assert.Equal(t, 3, rt.Calls["setRuntimeLabel"], "three labels")
	assert.Equal(t, map[string]int{"rt-1": 1}, snap.RegistrationsByRuntimeID)
	assert.Equal(t, 1, snap.Calls["token"], "the OAuth token is reused")

	// tenants are separate
	_, err = c.GetConsoleURL(ctx, "other-tenant", "rt-1")
	assert.True(t, director.IsNotFound(err))
	err = c.UpdateRuntimeLabels(ctx, "other-tenant", id, map[string]string{"a": "b"})
	assert.True(t, director.IsNotFound(err), "%v", err)
	otherID, err := c.RegisterRuntime(ctx, "other-tenant", "rt-1", "c-1", "", nil)
	require.NoError(t, err)
	assert.NotEqual(t, id, otherID)

	require.NoError(t, c.UnregisterRuntime(ctx, tenant, id))
	require.NoError(t, c.UnregisterRuntime(ctx, tenant, id), "unregistering a missing runtime succeeds")
	_, err = c.GetConsoleURL(ctx, tenant, "rt-1")
	assert.True(t, director.IsNotFound(err))
	err = c.SetRuntimeStatusCondition(ctx, tenant, id, compass.ConditionFailed)
	assert.True(t, director.IsNotFound(err))
	assert.ErrorContains(t, err, fmt.Sprintf("setting the status condition of runtime %s in the Director to FAILED", id))
	_, err = c.RequestOneTimeToken(ctx, tenant, id)
	assert.True(t, director.IsNotFound(err))
	assert.False(t, director.IsTemporary(err))
	assert.ErrorContains(t, err, "revoking earlier tokens: runtime "+id+": not found")

	snap = e.st.Snapshot()
	assert.Equal(t, map[string]int{"rt-1": 1}, snap.UnregistrationsByRuntimeID)
	assert.NotContains(t, snap.Tenants, tenant)
	assert.Len(t, snap.Tenants["other-tenant"], 1)
}

func TestIdempotentRegistrationUnderInjectedErrors(t *testing.T) {
	e := newEnv(t, 2026)
	// Every call tries up to 100 times, as the step's durable retries would; the breaker is off, so
	// that a run of injected failures does not stop the calls this test makes.
	e.cfg.Calls.Attempts, e.cfg.Calls.BreakerThreshold = 100, -1
	require.NoError(t, e.sb.SetFaults(directorstandin.Name, sandbox.Faults{ErrorRate: 0.3, LostResponseRate: 0.3}))
	c := e.client(t)
	ctx := sandboxtest.Context(t, 60*time.Second)

	ids := map[string]string{}
	for i := range 30 {
		rid := fmt.Sprintf("rt-%02d", i)
		id, err := c.RegisterRuntime(ctx, tenant, rid, "c-"+rid, "", map[string]any{"subaccount": "sub"})
		require.NoError(t, err, rid)
		require.NoError(t, c.SetRuntimeStatusCondition(ctx, tenant, id, compass.ConditionProvisioning), rid)
		require.NoError(t, c.UpdateRuntimeLabels(ctx, tenant, id, map[string]string{director.ConsoleURLLabel: "https://console." + rid}), rid)
		_, err = c.RequestOneTimeToken(ctx, tenant, id)
		require.NoError(t, err, rid)
		ids[rid] = id
	}
	for rid := range ids {
		url, err := c.GetConsoleURL(ctx, tenant, rid)
		require.NoError(t, err)
		assert.Equal(t, "https://console."+rid, url)
	}

	snap := e.st.Snapshot()
	assert.Len(t, snap.Tenants[tenant], 30)
	assert.Len(t, snap.RegistrationsByRuntimeID, 30)
	for rid, n := range snap.RegistrationsByRuntimeID {
		assert.Equal(t, 1, n, rid)
	}
	lostTokens := 0
	for _, rt := range snap.Tenants[tenant] {
		assert.Equal(t, 1, rt.ValidTokens, "exactly one valid one-time token for %s", rt.ID)
		lostTokens += rt.TokensIssued - 1
		assert.Equal(t, compass.ConditionProvisioning, rt.Status.Condition)
		assert.Equal(t, ids[rt.Labels[director.RuntimeIDLabel].(string)], rt.ID)
	}
	st, err := e.sb.Stats(directorstandin.Name)
	require.NoError(t, err)
	assert.Greater(t, st.Errors500+st.Errors503, 15, "the retries were exercised: %+v", st)
	assert.Positive(t, lostTokens, "tokens were issued whose answer got lost")

	for _, id := range ids {
		require.NoError(t, c.UnregisterRuntime(ctx, tenant, id))
	}
	snap = e.st.Snapshot()
	assert.Empty(t, snap.Tenants)
	for rid, n := range snap.UnregistrationsByRuntimeID {
		assert.Equal(t, 1, n, rid)
	}
}

func TestPermanentFailuresAreNotRetried(t *testing.T) {
	e := newEnv(t, 3)
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)

	_, err := c.RegisterRuntime(ctx, tenant, "rt-1", "c 1", "", nil)
	require.Error(t, err)
	assert.False(t, director.IsTemporary(err))
	assert.False(t, director.IsNotFound(err))
	var de *director.Error
	require.ErrorAs(t, err, &de)
	assert.Equal(t, 1, de.Attempts)
	var ge *director.GraphQLError
	require.ErrorAs(t, err, &ge)
	assert.Equal(t, director.KindInvalidData, ge.Kind)
	assert.ErrorContains(t, err, "registering runtime rt-1 in the Director")
	assert.ErrorContains(t, err, `Invalid data RuntimeRegisterInput [name=must be in a valid format]`)
	snap := e.st.Snapshot()
	assert.Equal(t, 1, snap.Calls["registerRuntime"])
	assert.Equal(t, 1, snap.Calls["runtimes"])

	_, err = c.RegisterRuntime(ctx, "", "rt-1", "", "", nil)
	assert.ErrorContains(t, err, "tenant, runtime name required")
	assert.False(t, director.IsTemporary(err))
	err = c.SetRuntimeStatusCondition(ctx, tenant, "id", "RUNNING")
	assert.ErrorContains(t, err, `unknown status condition "RUNNING"`)
	assert.Equal(t, 1, e.st.Snapshot().Calls["registerRuntime"], "nothing was sent")

	e.cfg.OAuthClientSecret = "wrong"
	wrong := e.client(t)
	_, err = wrong.RegisterRuntime(ctx, tenant, "rt-1", "c-1", "", nil)
	require.Error(t, err)
	assert.False(t, director.IsTemporary(err))
	require.ErrorAs(t, err, &de)
	assert.Equal(t, http.StatusUnauthorized, de.StatusCode)
	assert.Equal(t, 1, de.Attempts)
	assert.Equal(t, 1, e.st.Snapshot().Calls["token.rejected"])
}

func TestOutageLongerThanDeadlineIsTemporary(t *testing.T) {
	e := newEnv(t, 4)
	sandboxtest.Outage(t, e.sb, directorstandin.Name)
	c := e.client(t)

	start := time.Now()
	_, err := c.RegisterRuntime(sandboxtest.Context(t, 300*time.Millisecond), tenant, "rt-1", "c-1", "", nil)
	clientkittest.RequireGaveUp(t, err, start, 3)
	assert.True(t, director.IsTemporary(err), "%v", err)
	assert.Empty(t, e.st.Snapshot().RegistrationsByRuntimeID)

	require.NoError(t, e.sb.SetFaults(directorstandin.Name, sandbox.Faults{}))
	_, err = c.RegisterRuntime(sandboxtest.Context(t, 5*time.Second), tenant, "rt-1", "c-1", "", nil)
	require.NoError(t, err)
}

// The sandbox cannot make the Director fail internally, so a server of its own answers the first
// request with Compass's InternalError.
func TestInternalErrorIsRetried(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/oauth/token" {
			_, _ = w.Write([]byte(`{"access_token":"t","token_type":"bearer","expires_in":3600}`))
			return
		}
		assert.Equal(t, "Bearer t", r.Header.Get("Authorization"))
		assert.Equal(t, tenant, r.Header.Get("Tenant"))
		var req struct {
			Query     string         `json:"query"`
			Variables map[string]any `json:"variables"`
		}
		assert.NoError(t, json.NewDecoder(r.Body).Decode(&req))
		if calls.Add(1) == 1 {
			_, _ = w.Write([]byte(`{"data":{"result":null},"errors":[{"message":"Internal Server Error","extensions":{"error":"InternalError"}}]}`))
			return
		}
		assert.Equal(t, map[string]any{"id": "c-id"}, req.Variables)
		if strings.Contains(req.Query, "auths") {
			_, _ = w.Write([]byte(`{"data":{"result":{"id":"c-id","auths":[]}}}`))
			return
		}
		_, _ = w.Write([]byte(`{"data":{"result":{"token":"ott","connectorURL":"https://c"}}}`))
	}))
	t.Cleanup(srv.Close)
	c, err := director.New(director.Config{URL: srv.URL + "/graphql", OAuthTokenURL: srv.URL + "/oauth/token", OAuthClientID: "id",
		RetryInitialBackoff: time.Millisecond})
	require.NoError(t, err)
	tok, err := c.RequestOneTimeToken(sandboxtest.Context(t, 5*time.Second), tenant, "c-id")
	require.NoError(t, err)
	assert.Equal(t, compass.Token{Token: "ott", ConnectorURL: "https://c"}, tok)
	assert.EqualValues(t, 3, calls.Load(), "the failed attempt's lookup of earlier tokens, then the lookup and the token")
}

func TestSkipCertVerify(t *testing.T) {
	sb := sandbox.New(sandbox.Options{})
	st := directorstandin.New(directorstandin.Options{ClientID: "keb", ClientSecret: "s"})
	require.NoError(t, sb.Register(st))
	srv := httptest.NewTLSServer(sb)
	t.Cleanup(srv.Close)
	cfg := director.Config{URL: srv.URL + "/director/graphql", OAuthTokenURL: srv.URL + "/director/oauth/token",
		OAuthClientID: "keb", OAuthClientSecret: "s", RetryInitialBackoff: time.Millisecond, RetryMaxBackoff: 10 * time.Millisecond}

	c, err := director.New(cfg)
	require.NoError(t, err)
	_, err = c.RegisterRuntime(sandboxtest.Context(t, 200*time.Millisecond), tenant, "rt-1", "c-1", "", nil)
	require.Error(t, err, "a self-signed certificate is rejected by default")
	assert.True(t, director.IsTemporary(err), "like any failure to connect: %v", err)
	assert.Zero(t, st.Snapshot().Calls["token"], "no request got through")

	cfg.SkipCertVerify = true
	c, err = director.New(cfg)
	require.NoError(t, err)
	_, err = c.RegisterRuntime(sandboxtest.Context(t, 5*time.Second), tenant, "rt-1", "c-1", "", nil)
	require.NoError(t, err)
}

// The runtime's status condition reads back as set (the Runtime Agent sets it, the provisioner
// reads it); a missing runtime is not found, a missing tenant refused before any call.
func TestRuntimeStatusConditionReadsBack(t *testing.T) {
	e := newEnv(t, 1)
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)
	id, err := c.RegisterRuntime(ctx, tenant, "rt-cond", "c-cond", "", nil)
	require.NoError(t, err)
	got, err := c.RuntimeStatusCondition(ctx, tenant, id)
	require.NoError(t, err)
	assert.Equal(t, compass.ConditionInitial, got, "the Director's default")
	for _, want := range []string{compass.ConditionConnected, compass.ConditionFailed} {
		require.NoError(t, c.SetRuntimeStatusCondition(ctx, tenant, id, want))
		got, err = c.RuntimeStatusCondition(ctx, tenant, id)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	_, err = c.RuntimeStatusCondition(ctx, tenant, "00000000-0000-0000-0000-000000000000")
	assert.True(t, director.IsNotFound(err), "%v", err)
	_, err = c.RuntimeStatusCondition(ctx, "", id)
	assert.ErrorContains(t, err, "tenant")
}
