package avs_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/avs"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit/clientkittest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/avsstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const parentID = 4242

type env struct {
	sb  *sandbox.Sandbox
	st  *avsstandin.StandIn
	cfg avs.Config
}

func newEnv(t *testing.T, seed uint64) *env {
	return newEnvWithClock(t, seed, time.Now)
}

func newEnvWithClock(t *testing.T, seed uint64, now func() time.Time) *env {
	t.Helper()
	st := avsstandin.New(avsstandin.Options{ClientID: "keb", ClientSecret: "s3cret", Username: "keb-user", Password: "pw", ParentIDs: []int64{parentID}, Now: now})
	sb, base := sandboxtest.Serve(t, sandbox.Options{Seed: seed}, st)
	return &env{sb: sb, st: st, cfg: avs.Config{
		URL:                 base + "/avs",
		OAuthURL:            base + "/avs/oauth/token",
		ClientID:            "keb",
		ClientSecret:        "s3cret",
		OAuthUsername:       "keb-user",
		OAuthPassword:       "pw",
		ParentID:            parentID,
		Timeout:             2 * time.Second,
		RetryInitialBackoff: 2 * time.Millisecond,
		RetryMaxBackoff:     20 * time.Millisecond,
	}}
}

func (e *env) client(t *testing.T) *avs.Client { return sandboxtest.NewClient(t, avs.New, e.cfg) }

func request(name string) *avs.EvaluationRequest {
	return &avs.EvaluationRequest{
		Name: name, Description: "internal evaluation of " + name, DefinitionType: "BASIC",
		URL: "https://dashboard.example/" + name, CheckType: "HTTPSGET", Interval: 180, Timeout: 30000,
		TesterAccessID: 77, Visibility: "PUBLIC", ParentID: parentID, Threshold: 30000,
		Tags: []avs.Tag{{Content: "eu-west", TagClassID: 3, TagClassName: "region"}},
	}
}

func TestConfigFromEnvironment(t *testing.T) {
	t.Setenv("APP_AVS_URL", "https://avs.example")
	t.Setenv("APP_AVS_OAUTH_URL", "https://avs.example/oauth/token")
	t.Setenv("APP_AVS_CLIENT_ID", "id")
	t.Setenv("APP_AVS_CLIENT_SECRET", "secret")
	t.Setenv("APP_AVS_OAUTH_USERNAME", "user")
	t.Setenv("APP_AVS_OAUTH_PASSWORD", "pw")
	t.Setenv("APP_AVS_PARENT_ID", "17")
	t.Setenv("APP_AVS_INTERNAL_TESTER_ACCESS_ID", "3")
	t.Setenv("APP_AVS_EXTERNAL_TESTER_ACCESS_ID", "4")
	var cfg avs.Config
	require.NoError(t, envconfig.Process("APP", &cfg))
	assert.Equal(t, avs.Config{URL: "https://avs.example", OAuthURL: "https://avs.example/oauth/token", OAuthGrant: "password",
		OAuthUsername: "user", OAuthPassword: "pw", ClientID: "id",
		ClientSecret: "secret", ParentID: 17, InternalTesterAccessID: 3, ExternalTesterAccessID: 4,
		Timeout: 10 * time.Second, Config: clientkit.Config{Calls: clientkittest.DefaultCalls}, RetryInitialBackoff: 200 * time.Millisecond, RetryMaxBackoff: 10 * time.Second}, cfg)
	require.NoError(t, cfg.Validate())

	_, err := avs.New(avs.Config{URL: "avs.example"})
	assert.ErrorContains(t, err, "APP_AVS_URL must be an absolute http(s) URL")
	assert.ErrorContains(t, err, "APP_AVS_OAUTH_URL is required")
	assert.ErrorContains(t, err, "APP_AVS_CLIENT_ID is required")
	assert.ErrorContains(t, err, "APP_AVS_OAUTH_USERNAME is required", "the password grant by default")
	_, err = avs.New(avs.Config{URL: "https://avs.example", OAuthURL: "https://avs.example/t", ClientID: "x", OAuthGrant: "implicit"})
	assert.ErrorContains(t, err, "APP_AVS_OAUTH_GRANT must be password or client_credentials")
	_, err = avs.New(avs.Config{URL: "https://avs.example", OAuthURL: "https://avs.example/t", ClientID: "x", OAuthGrant: "client_credentials"})
	assert.NoError(t, err)
}

func TestEvaluationLifecycle(t *testing.T) {
	e := newEnv(t, 1)
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)

	ev, err := c.CreateEvaluation(ctx, request("rt-1"))
	require.NoError(t, err)
	assert.Positive(t, ev.ID)
	assert.Equal(t, "rt-1", ev.Name)
	assert.Equal(t, int64(parentID), ev.ParentID)
	assert.Equal(t, int64(77), ev.TesterAccessID)
	assert.Equal(t, "keb", ev.Owner)

	assert.Equal(t, int64(30000), ev.Threshold)
	assert.Equal(t, "rt-1", ev.Service, "the service defaults to the name")

	got, err := c.GetEvaluation(ctx, ev.ID)
	require.NoError(t, err)
	assert.Equal(t, ev, got)

	tagged, err := c.AddTag(ctx, ev.ID, avs.Tag{Content: "gardener-shoot", TagClassID: 8})
	require.NoError(t, err)
	assert.Equal(t, []avs.Tag{{Content: "eu-west", TagClassID: 3, TagClassName: "region"}, {Content: "gardener-shoot", TagClassID: 8}}, tagged.Tags)

	err = c.DeleteEvaluation(ctx, ev.ID)
	assert.Equal(t, http.StatusBadRequest, clientkit.StatusOf(err), "AVS refuses to delete a subevaluation: %v", err)
	require.NoError(t, c.RemoveParent(ctx, parentID, ev.ID))
	require.NoError(t, c.RemoveParent(ctx, parentID, ev.ID), "unlinking twice (AVS: does not contain subevaluation)")
	got, err = c.GetEvaluation(ctx, ev.ID)
	require.NoError(t, err)
	assert.Zero(t, got.ParentID)
	require.NoError(t, c.DeleteEvaluation(ctx, ev.ID))
	require.NoError(t, c.DeleteEvaluation(ctx, ev.ID), "deleting a missing evaluation succeeds")
	require.NoError(t, c.RemoveParent(ctx, parentID, ev.ID), "unlinking a missing evaluation succeeds")

	_, err = c.GetEvaluation(ctx, ev.ID)
	require.Error(t, err)
	assert.True(t, avs.IsNotFound(err))
	assert.False(t, avs.IsTemporary(err))
	assert.ErrorContains(t, err, fmt.Sprintf("getting AVS evaluation %d", ev.ID))

	snap := e.st.Snapshot()
	assert.Equal(t, map[string]int{"rt-1": 1}, snap.CreatesByName)
	assert.Equal(t, map[string]int{"rt-1": 1}, snap.DeletesByName)
	assert.Equal(t, 1, snap.Calls["token"], "the token is reused")
}

// AVS cannot be searched by name, so a creation whose answer is lost cannot be found again: the
// client never sends a creation again after AVS may have carried it out, and says so. Under
// injected errors and lost answers every evaluation is created once, plus at most once for each
// creation the client reported as of unknown outcome.
func TestCreateUnderInjectedErrors(t *testing.T) {
	e := newEnv(t, 2026)
	// Every call tries up to 100 times, as the step's durable retries would; the breaker is off, so
	// that a run of injected failures does not stop the calls this test makes.
	e.cfg.Calls.Attempts, e.cfg.Calls.BreakerThreshold = 100, -1
	require.NoError(t, e.sb.SetFaults("avs", sandbox.Faults{ErrorRate: 0.3, LostResponseRate: 0.3}))
	c := e.client(t)
	ctx := sandboxtest.Context(t, 60*time.Second)

	ids := map[int64]string{}
	unknown := map[string]int{}
	for i := range 50 {
		name := fmt.Sprintf("runtime-%02d", i)
		for try := 0; ; try++ {
			require.Less(t, try, 100, name)
			ev, err := c.CreateEvaluation(ctx, request(name))
			if err == nil {
				assert.Equal(t, name, ev.Name)
				ids[ev.ID] = name
				break
			}
			require.True(t, avs.IsTemporary(err), "%v", err)
			if avs.IsOutcomeUnknown(err) {
				unknown[name]++
				var ae *avs.Error
				require.ErrorAs(t, err, &ae)
				assert.Contains(t, []int{http.StatusInternalServerError, http.StatusBadGateway}, ae.StatusCode)
			}
		}
	}
	assert.Len(t, ids, 50)
	assert.NotEmpty(t, unknown, "lost answers were reported")

	snap := e.st.Snapshot()
	assert.Len(t, snap.CreatesByName, 50)
	for name, n := range snap.CreatesByName {
		assert.LessOrEqual(t, n, 1+unknown[name], "%s: created %d times, %d unknown outcomes reported", name, n, unknown[name])
	}
	st, err := e.sb.Stats("avs")
	require.NoError(t, err)
	assert.Positive(t, st.Errors503, "the retries were exercised: %+v", st)

	// deleting them all (unlinked first) under the same faults leaves only the parent and the
	// evaluations the client could not know of
	for id := range ids {
		require.NoError(t, c.RemoveParent(ctx, parentID, id))
		require.NoError(t, c.DeleteEvaluation(ctx, id))
	}
	snap = e.st.Snapshot()
	extra := 0
	for _, n := range unknown {
		extra += n
	}
	assert.LessOrEqual(t, len(snap.Evaluations), 1+extra)
	for name, n := range snap.DeletesByName {
		assert.Equal(t, 1, n, name)
	}
}

func TestPermanentFailuresAreNotRetried(t *testing.T) {
	e := newEnv(t, 3)
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)

	bad := request("orphan")
	bad.ParentID = 999
	_, err := c.CreateEvaluation(ctx, bad)
	require.Error(t, err)
	assert.False(t, avs.IsTemporary(err))
	var ae *avs.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
	assert.Equal(t, 1, ae.Attempts)
	assert.ErrorContains(t, err, `creating AVS evaluation "orphan"`)
	assert.ErrorContains(t, err, "parent evaluation 999 does not exist")
	snap := e.st.Snapshot()
	assert.Equal(t, 1, snap.Calls["create"])

	_, err = c.AddTag(ctx, 555, avs.Tag{Content: "x", TagClassID: 1})
	assert.True(t, avs.IsNotFound(err))
	assert.False(t, avs.IsTemporary(err))

	_, err = c.CreateEvaluation(ctx, &avs.EvaluationRequest{})
	assert.False(t, avs.IsTemporary(err))

	e.cfg.ClientSecret = "wrong"
	wrong := e.client(t)
	_, err = wrong.GetEvaluation(ctx, parentID)
	require.Error(t, err)
	assert.False(t, avs.IsTemporary(err))
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusUnauthorized, ae.StatusCode)
	assert.Equal(t, 1, ae.Attempts)
	assert.Equal(t, 1, e.st.Snapshot().Calls["token.rejected"])
}

func TestOutageLongerThanDeadlineIsTemporary(t *testing.T) {
	e := newEnv(t, 4)
	sandboxtest.Outage(t, e.sb, "avs")
	c := e.client(t)

	start := time.Now()
	_, err := c.CreateEvaluation(sandboxtest.Context(t, 300*time.Millisecond), request("rt-outage"))
	clientkittest.RequireGaveUp(t, err, start, 3)
	assert.True(t, avs.IsTemporary(err), "%v", err)
	assert.Empty(t, e.st.Snapshot().CreatesByName)

	// once the outage is over the same call succeeds
	require.NoError(t, e.sb.SetFaults("avs", sandbox.Faults{}))
	_, err = c.CreateEvaluation(sandboxtest.Context(t, 5*time.Second), request("rt-outage"))
	require.NoError(t, err)
	assert.Equal(t, 1, e.st.Snapshot().CreatesByName["rt-outage"])
}

func TestLatencyBeyondRequestTimeoutIsRetried(t *testing.T) {
	e := newEnv(t, 5)
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)
	_, err := c.GetEvaluation(ctx, parentID) // fetch the token before slowing AVS down
	require.NoError(t, err)

	require.NoError(t, e.sb.SetFaults("avs", sandbox.Faults{Latency: time.Second}))
	e.cfg.Timeout = 100 * time.Millisecond
	slow := e.client(t)
	_, err = slow.GetEvaluation(sandboxtest.Context(t, 500*time.Millisecond), parentID)
	require.Error(t, err)
	assert.True(t, avs.IsTemporary(err), "%v", err)
}

func TestRejectedTokenIsReplaced(t *testing.T) {
	clock := sandboxtest.NewWallClock()
	e := newEnvWithClock(t, 6, clock.Now)
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)
	_, err := c.GetEvaluation(ctx, parentID)
	require.NoError(t, err)

	// AVS now considers the cached token expired while the client does not
	clock.Advance(2 * time.Hour)
	_, err = c.GetEvaluation(ctx, parentID)
	require.NoError(t, err)
	snap := e.st.Snapshot()
	assert.Equal(t, 2, snap.Calls["token"])
	assert.Equal(t, 1, snap.Calls["unauthorized"])

	// credentials that stop working are a permanent failure, not a loop
	e.cfg.ClientSecret = "rotated"
	_, err = e.client(t).GetEvaluation(ctx, parentID)
	assert.False(t, avs.IsTemporary(err))
}

func TestNetworkErrorsAreTemporary(t *testing.T) {
	addr := sandboxtest.ClosedAddr(t)

	c, err := avs.New(avs.Config{URL: "http://" + addr, OAuthURL: "http://" + addr + "/oauth/token", ClientID: "x", OAuthGrant: avs.GrantClientCredentials,
		RetryInitialBackoff: time.Millisecond, RetryMaxBackoff: 5 * time.Millisecond})
	require.NoError(t, err)
	err = c.DeleteEvaluation(sandboxtest.Context(t, 100*time.Millisecond), 1)
	require.Error(t, err)
	assert.True(t, avs.IsTemporary(err), "%v", err)
	assert.ErrorContains(t, err, "after 3 attempt(s)", "bounded by its attempts, not by the deadline")
	assert.ErrorContains(t, err, "deleting AVS evaluation 1")
}
