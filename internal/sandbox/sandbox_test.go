package sandbox_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/avsstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type env struct {
	t     *testing.T
	sb    *sandbox.Sandbox
	avs   *avsstandin.StandIn
	url   string
	clock *sandboxtest.Clock
}

func newEnv(t *testing.T, seed uint64) *env {
	t.Helper()
	c := sandboxtest.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	st := avsstandin.New(avsstandin.Options{ClientID: "id", ClientSecret: "secret", ParentIDs: []int64{7}, Now: c.Now})
	sb, srvURL := sandboxtest.Serve(t, sandbox.Options{Seed: seed, Now: c.Now}, st)
	return &env{t: t, sb: sb, avs: st, url: srvURL, clock: c}
}

func (e *env) do(ctx context.Context, method, path, token, body string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, e.url+path, strings.NewReader(body))
	require.NoError(e.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if strings.HasPrefix(path, "/avs/oauth") {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else if body != "" {
		req.Header.Set("Content-Type", "application/json") // AvS refuses a body not declared JSON
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *env) token() string {
	e.t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {"id"}, "client_secret": {"secret"}}
	return sandboxtest.Token(e.t, e.url+"/avs/oauth/token", form).AccessToken
}

func (e *env) putFaults(body string) (int, string) {
	return e.do(context.Background(), http.MethodPut, "/_sandbox/avs/faults", "", body)
}

const createBody = `{"name":"eval-1","definition_type":"BASIC","url":"https://x","check_type":"HTTPSGET","interval":180,"timeout":30000}`

func TestFaultsEndpoints(t *testing.T) {
	e := newEnv(t, 1)
	code, body := e.do(context.Background(), http.MethodGet, "/_sandbox/avs/faults", "", "")
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"errorRate":0}`, body)

	code, body = e.putFaults(`{"errorRate":0.3,"latency":"2s","outageFrom":"2026-01-01T13:00:00Z","outageUntil":"2026-01-01T14:00:00Z"}`)
	require.Equal(t, http.StatusOK, code, body)
	code, body = e.do(context.Background(), http.MethodGet, "/_sandbox/avs/faults", "", "")
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"errorRate":0.3,"latency":"2s","outageFrom":"2026-01-01T13:00:00Z","outageUntil":"2026-01-01T14:00:00Z"}`, body)
	f, err := e.sb.Faults("avs")
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, f.Latency)

	for _, bad := range []string{`{"errorRate":1.5}`, `{"latency":"soon"}`, `{"latency":"-1s"}`, `{"errRate":0.3}`,
		`{"outageFrom":"2026-01-01T14:00:00Z","outageUntil":"2026-01-01T13:00:00Z"}`, `not json`} {
		code, body = e.putFaults(bad)
		assert.Equal(t, http.StatusBadRequest, code, "%s: %s", bad, body)
	}
	code, _ = e.do(context.Background(), http.MethodPut, "/_sandbox/nope/faults", "", `{}`)
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = e.do(context.Background(), http.MethodGet, "/nope/x", "", "")
	assert.Equal(t, http.StatusNotFound, code)

	code, _ = e.do(context.Background(), http.MethodDelete, "/_sandbox/avs/faults", "", "")
	assert.Equal(t, http.StatusNoContent, code)
	f, _ = e.sb.Faults("avs")
	assert.Equal(t, sandbox.Faults{}, f)

	code, body = e.do(context.Background(), http.MethodGet, "/_sandbox/", "", "")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"name":"avs"`)
}

// errorSequence sends n token requests and returns which of them failed, with which status.
func errorSequence(t *testing.T, seed uint64, rate float64, n int) []int {
	e := newEnv(t, seed)
	require.NoError(t, e.sb.SetFaults("avs", sandbox.Faults{ErrorRate: rate}))
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {"id"}, "client_secret": {"secret"}}.Encode()
	codes := make([]int, n)
	for i := range codes {
		codes[i], _ = e.do(context.Background(), http.MethodPost, "/avs/oauth/token", "", form)
	}
	st, err := e.sb.Stats("avs")
	require.NoError(t, err)
	assert.Equal(t, n, st.Requests)
	assert.Equal(t, n, st.Served+st.Errors500+st.Errors503)
	return codes
}

func TestErrorRate(t *testing.T) {
	const n = 1000
	codes := errorSequence(t, 42, 0.3, n)
	count := map[int]int{}
	for _, c := range codes {
		count[c]++
	}
	failed := count[500] + count[503]
	assert.Equal(t, n, count[200]+failed, "only 200, 500 and 503: %v", count)
	assert.InDelta(t, 0.3, float64(failed)/n, 0.05, "failure rate: %v", count)
	assert.Positive(t, count[500])
	assert.Positive(t, count[503])

	// the same seed injects the same errors into the same sequence of requests
	assert.Equal(t, codes, errorSequence(t, 42, 0.3, n))
}

func TestFaultedCallsCreateNothing(t *testing.T) {
	e := newEnv(t, 3)
	tok := e.token()
	require.NoError(t, e.sb.SetFaults("avs", sandbox.Faults{ErrorRate: 1}))
	for range 20 {
		code, _ := e.do(context.Background(), http.MethodPost, "/avs/api/v2/evaluationmetadata", tok, createBody)
		assert.Contains(t, []int{500, 503}, code)
	}
	snap := e.avs.Snapshot()
	assert.Len(t, snap.Evaluations, 1, "only the configured parent")
	assert.Empty(t, snap.CreatesByName)
	assert.Zero(t, snap.Calls["create"])

	require.NoError(t, e.sb.SetFaults("avs", sandbox.Faults{}))
	code, body := e.do(context.Background(), http.MethodPost, "/avs/api/v2/evaluationmetadata", tok, createBody)
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, 1, e.avs.Snapshot().CreatesByName["eval-1"])
}

func TestLatency(t *testing.T) {
	e := newEnv(t, 4)
	tok := e.token()
	require.NoError(t, e.sb.SetFaults("avs", sandbox.Faults{Latency: 150 * time.Millisecond}))

	start := time.Now()
	code, _ := e.do(context.Background(), http.MethodGet, "/avs/api/v2/evaluationmetadata/7", tok, "")
	assert.Equal(t, http.StatusOK, code)
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)

	// a client giving up during the delay leaves nothing behind
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	code, _ = e.do(ctx, http.MethodPost, "/avs/api/v2/evaluationmetadata", tok, createBody)
	assert.Zero(t, code)
	require.Eventually(t, func() bool {
		st, _ := e.sb.Stats("avs")
		return st.Abandoned == 1
	}, 10*time.Second, 10*time.Millisecond, "the stand-in sees the abandoned request once its delay is over (later on a busy machine)")
	assert.Empty(t, e.avs.Snapshot().CreatesByName)

	// the admin endpoints are never delayed
	start = time.Now()
	code, _ = e.do(context.Background(), http.MethodGet, "/_sandbox/avs/objects", "", "")
	assert.Equal(t, http.StatusOK, code)
	assert.Less(t, time.Since(start), 150*time.Millisecond)
}

func TestOutageWindow(t *testing.T) {
	e := newEnv(t, 5)
	tok := e.token()
	code, body := e.putFaults(`{"outageFrom":"2026-01-01T12:10:00Z","outageUntil":"2026-01-01T12:20:00Z"}`)
	require.Equal(t, http.StatusOK, code, body)

	get := func() int {
		code, _ := e.do(context.Background(), http.MethodGet, "/avs/api/v2/evaluationmetadata/7", tok, "")
		return code
	}
	assert.Equal(t, http.StatusOK, get(), "before the window")
	e.clock.Advance(10 * time.Minute) // 12:10
	assert.Equal(t, http.StatusServiceUnavailable, get(), "at its start")
	code, _ = e.do(context.Background(), http.MethodPost, "/avs/api/v2/evaluationmetadata", tok, createBody)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	e.clock.Advance(10 * time.Minute) // 12:20
	assert.Equal(t, http.StatusOK, get(), "at its end")

	st, _ := e.sb.Stats("avs")
	assert.Equal(t, 2, st.Outage)
	assert.Empty(t, e.avs.Snapshot().CreatesByName)
}

func TestObjectsAndReset(t *testing.T) {
	e := newEnv(t, 6)
	tok := e.token()
	code, body := e.do(context.Background(), http.MethodPost, "/avs/api/v2/evaluationmetadata", tok, createBody)
	require.Equal(t, http.StatusOK, code, body)

	code, body = e.do(context.Background(), http.MethodGet, "/_sandbox/avs/objects", "", "")
	require.Equal(t, http.StatusOK, code)
	var objs avsstandin.Objects
	require.NoError(t, json.Unmarshal([]byte(body), &objs))
	require.Len(t, objs.Evaluations, 2)
	assert.Equal(t, "eval-1", objs.Evaluations[1].Name)
	assert.Equal(t, map[string]int{"create": 1}, objs.Evaluations[1].Calls)
	assert.Equal(t, map[string]int{"eval-1": 1}, objs.CreatesByName)

	code, _ = e.do(context.Background(), http.MethodPost, "/_sandbox/reset", "", "")
	require.Equal(t, http.StatusNoContent, code)
	snap := e.avs.Snapshot()
	require.Len(t, snap.Evaluations, 1)
	assert.Equal(t, int64(7), snap.Evaluations[0].ID, "parents survive a reset")
	assert.Empty(t, snap.CreatesByName)
	st, _ := e.sb.Stats("avs")
	assert.Zero(t, st.Requests)

	// tokens survive a reset too
	code, _ = e.do(context.Background(), http.MethodGet, "/avs/api/v2/evaluationmetadata/7", tok, "")
	assert.Equal(t, http.StatusOK, code)
}

func TestRegister(t *testing.T) {
	sb := sandbox.New(sandbox.Options{})
	require.NoError(t, sb.Register(avsstandin.New(avsstandin.Options{})))
	assert.Error(t, sb.Register(avsstandin.New(avsstandin.Options{})), "duplicate name")
	assert.Equal(t, []string{"avs"}, sb.Systems())
	assert.Error(t, sb.SetFaults("nope", sandbox.Faults{}))
}

func TestLostResponsesReachTheStandIn(t *testing.T) {
	var handled int
	sb, srvURL := sandboxtest.Serve(t, sandbox.Options{Seed: 7}, &countingSystem{name: "sys", handled: &handled})
	require.NoError(t, sb.SetFaults("sys", sandbox.Faults{LostResponseRate: 1}))

	resp, err := http.Post(srvURL+"/sys/things", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
	assert.Equal(t, 1, handled, "the stand-in handled the request whose answer was lost")
	st, err := sb.Stats("sys")
	require.NoError(t, err)
	assert.Equal(t, 1, st.LostResponses)

	assert.Error(t, sandbox.Faults{LostResponseRate: 1.5}.Validate())
}

type countingSystem struct {
	name    string
	handled *int
}

func (c *countingSystem) Name() string { return c.name }
func (c *countingSystem) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	*c.handled++
	w.WriteHeader(http.StatusCreated)
}
func (c *countingSystem) Objects() any { return map[string]int{"handled": *c.handled} }
func (c *countingSystem) Reset(context.Context) error {
	*c.handled = 0
	return nil
}

// administeredSystem has admin endpoints of its own.
type administeredSystem struct{ countingSystem }

func (a *administeredSystem) Admin() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path)
	})
}

func TestSystemsServeTheirOwnAdminEndpoints(t *testing.T) {
	handled := 0
	_, base := sandboxtest.Serve(t, sandbox.Options{}, &administeredSystem{countingSystem{name: "own", handled: &handled}},
		&countingSystem{name: "plain", handled: &handled})
	code, body := sandboxtest.Do(t, sandboxtest.Request(t, http.MethodPut, base+"/_sandbox/own/things/1", ""))
	assert.Equal(t, http.StatusAccepted, code)
	assert.Equal(t, "PUT /things/1", body)
	code, body = sandboxtest.Do(t, sandboxtest.Request(t, http.MethodGet, base+"/_sandbox/own/objects", ""))
	assert.Equal(t, http.StatusOK, code, "the common endpoints stay the sandbox's")
	assert.JSONEq(t, `{"handled":0}`, body)
	code, _ = sandboxtest.Do(t, sandboxtest.Request(t, http.MethodGet, base+"/_sandbox/plain/things", ""))
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = sandboxtest.Do(t, sandboxtest.Request(t, http.MethodGet, base+"/_sandbox/nobody/things", ""))
	assert.Equal(t, http.StatusNotFound, code)
	assert.Zero(t, handled)
}
