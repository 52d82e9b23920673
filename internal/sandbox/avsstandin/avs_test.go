package avsstandin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/avsstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const base = "/avs/api/v2/evaluationmetadata"

type env struct {
	t     *testing.T
	st    *avsstandin.StandIn
	url   string
	clock *sandboxtest.Clock
	token string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clock := sandboxtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return serve(t, clock, avsstandin.New(options(clock)))
}

func options(clock *sandboxtest.Clock) avsstandin.Options {
	return avsstandin.Options{ClientID: "id", ClientSecret: "secret", Username: "user", Password: "pw", ParentIDs: []int64{7}, TokenTTL: time.Minute, Now: clock.Now}
}

// serve serves the stand-in and takes a token.
func serve(t *testing.T, clock *sandboxtest.Clock, st *avsstandin.StandIn) *env {
	t.Helper()
	e := &env{t: t, clock: clock, st: st}
	_, e.url = sandboxtest.Serve(t, sandbox.Options{}, e.st)
	tok := sandboxtest.Token(t, e.url+"/avs/oauth/token", url.Values{"grant_type": {"client_credentials"}, "client_id": {"id"}, "client_secret": {"secret"}})
	assert.Equal(t, "bearer", tok.TokenType)
	assert.Equal(t, 60, tok.ExpiresIn)
	e.token = tok.AccessToken
	return e
}

func (e *env) tokenRequest(form url.Values, basic ...string) (int, string) {
	return sandboxtest.PostForm(e.t, e.url+"/avs/oauth/token", form, basic...)
}

func (e *env) api(method, path, body string) (int, string) {
	e.t.Helper()
	return sandboxtest.Do(e.t, sandboxtest.APIRequest(e.t, method, e.url+base+path, e.token, body))
}

func (e *env) create(name string, extra string) avsstandin.Evaluation {
	e.t.Helper()
	code, body := e.api(http.MethodPost, "", `{"name":"`+name+`","description":"d","definition_type":"BASIC","url":"https://a.example","check_type":"HTTPSGET","interval":180,"timeout":30000,"threshold":"30000","tester_access_id":11,"tags":[{"content":"eu","tag_class_id":5}]`+extra+`}`)
	require.Equal(e.t, http.StatusOK, code, body)
	var ev avsstandin.Evaluation
	require.NoError(e.t, json.Unmarshal([]byte(body), &ev))
	return ev
}

func TestTokenEndpoint(t *testing.T) {
	e := newEnv(t)
	code, body := e.tokenRequest(url.Values{"grant_type": {"client_credentials"}}, "id", "secret")
	assert.Equal(t, http.StatusOK, code, "credentials in a basic auth header: %s", body)
	code, body = e.tokenRequest(url.Values{"grant_type": {"client_credentials"}, "client_id": {"id"}, "client_secret": {"wrong"}})
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, body, "invalid_client")
	code, _ = e.tokenRequest(url.Values{"grant_type": {"client_credentials"}})
	assert.Equal(t, http.StatusUnauthorized, code, "no credentials")
	// the password grant, as the original broker asked for tokens
	code, body = e.tokenRequest(url.Values{"grant_type": {"password"}, "username": {"user"}, "password": {"pw"}}, "id", "secret")
	assert.Equal(t, http.StatusOK, code, body)
	code, _ = e.tokenRequest(url.Values{"grant_type": {"password"}, "username": {"user"}, "password": {"wrong"}}, "id", "secret")
	assert.Equal(t, http.StatusUnauthorized, code, "wrong resource owner password")
	code, body = e.tokenRequest(url.Values{"grant_type": {"authorization_code"}}, "id", "secret")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "unsupported_grant_type")
	snap := e.st.Snapshot()
	assert.Equal(t, 3, snap.Calls["token.rejected"])
}

func TestAPIRequiresBearerToken(t *testing.T) {
	e := newEnv(t)
	for _, auth := range []string{"", "Bearer nope", "Basic " + e.token} {
		req := sandboxtest.Request(t, http.MethodGet, e.url+base+"/7", "")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		code, _ := sandboxtest.Do(t, req)
		assert.Equal(t, http.StatusUnauthorized, code, auth)
	}
	code, _ := e.api(http.MethodGet, "/7", "")
	assert.Equal(t, http.StatusOK, code)
	e.clock.Advance(2 * time.Minute)
	code, _ = e.api(http.MethodGet, "/7", "")
	assert.Equal(t, http.StatusUnauthorized, code, "expired token")
}

func TestEvaluationLifecycle(t *testing.T) {
	e := newEnv(t)
	ev := e.create("runtime-1", `,"parent_id":7`)
	assert.Positive(t, ev.ID)
	assert.Equal(t, "runtime-1", ev.Name)
	assert.Equal(t, int64(7), ev.ParentID)
	assert.Equal(t, int64(11), ev.TesterAccessID)
	assert.Equal(t, "ACTIVE", ev.Status)
	assert.Equal(t, []avsstandin.Tag{{Content: "eu", TagClassID: 5}}, ev.Tags)
	id := "/" + jsonInt(ev.ID)

	code, body := e.api(http.MethodGet, id, "")
	require.Equal(t, http.StatusOK, code)
	var got avsstandin.Evaluation
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	assert.Equal(t, ev, got)

	assert.Contains(t, body, `"threshold":30000`, "a number in answers")

	// tags (POST): added once, a repeat is a no-op
	for range 2 {
		code, body = e.api(http.MethodPost, id+"/tag", `{"content":"gcp","tag_class_id":9,"tag_class_name":"provider"}`)
		require.Equal(t, http.StatusOK, code, body)
	}
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	assert.Equal(t, []avsstandin.Tag{{Content: "eu", TagClassID: 5}, {Content: "gcp", TagClassID: 9, TagClassName: "provider"}}, got.Tags)
	code, _ = e.api(http.MethodPost, id+"/tag", `{"content":""}`)
	assert.Equal(t, http.StatusBadRequest, code)
	code, _ = e.api(http.MethodPost, "/999/tag", `{"content":"x","tag_class_id":1}`)
	assert.Equal(t, http.StatusNotFound, code)

	// a subevaluation is removed from its parent before it is deleted
	other := e.create("runtime-1-external", "")
	otherID := "/" + jsonInt(other.ID)
	code, body = e.api(http.MethodDelete, id, "")
	assert.Equal(t, http.StatusBadRequest, code, "still held by its parent: %s", body)
	code, body = e.api(http.MethodDelete, "/7/child"+otherID, "")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "does not contain subevaluation", "not a child of 7")
	code, _ = e.api(http.MethodDelete, "/999/child"+otherID, "")
	assert.Equal(t, http.StatusNotFound, code)
	code, body = e.api(http.MethodDelete, "/7/child"+id, "")
	require.Equal(t, http.StatusOK, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	assert.Zero(t, got.ParentID)

	// deletion, then 404
	code, _ = e.api(http.MethodDelete, id, "")
	assert.Equal(t, http.StatusOK, code)
	code, _ = e.api(http.MethodDelete, id, "")
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = e.api(http.MethodGet, id, "")
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = e.api(http.MethodGet, "/abc", "")
	assert.Equal(t, http.StatusBadRequest, code)

	snap := e.st.Snapshot()
	require.Len(t, snap.Evaluations, 2)
	assert.Equal(t, int64(7), snap.Evaluations[0].ID)
	assert.Equal(t, other.ID, snap.Evaluations[1].ID)
	assert.Equal(t, map[string]int{"create": 1, "removeChild": 2}, snap.Evaluations[1].Calls)
	assert.Equal(t, map[string]int{"runtime-1": 1, "runtime-1-external": 1}, snap.CreatesByName)
	assert.Equal(t, map[string]int{"runtime-1": 1}, snap.DeletesByName)
}

func TestDuplicateNamesAreCounted(t *testing.T) {
	e := newEnv(t)
	a := e.create("same", "")
	b := e.create("same", "")
	assert.NotEqual(t, a.ID, b.ID, "AVS itself does not deduplicate")
	assert.Equal(t, 2, e.st.Snapshot().CreatesByName["same"])
}

func TestCreateValidation(t *testing.T) {
	e := newEnv(t)
	for _, body := range []string{
		`{"definition_type":"BASIC","url":"https://x"}`,
		`{"name":"a","url":"https://x"}`,
		`{"name":"a","definition_type":"BASIC"}`,
		`{"name":"a","definition_type":"BASIC","url":"https://x","interval":-1}`,
		`{"name":"a","definition_type":"BASIC","url":"https://x","tags":[{"content":"x"}]}`,
		`{"name":"a","definition_type":"BASIC","url":"https://x","parent_id":12345}`,
		`{"name":`,
		`{"name":"a","definition_type":"BASIC","url":"https://x","threshold":30000}`,
		`{"name":"a","definition_type":"BASIC","url":"https://x","threshold":"soon"}`,
	} {
		code, resp := e.api(http.MethodPost, "", body)
		assert.Equal(t, http.StatusBadRequest, code, "%s: %s", body, resp)
	}
	assert.Empty(t, e.st.Snapshot().CreatesByName)
}

func jsonInt(v int64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestStateSurvivesARestart(t *testing.T) {
	store := durable.NewMemoryStore()
	clock := sandboxtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func(ctx context.Context, store durable.Store) (*avsstandin.StandIn, error) {
		o := options(clock)
		o.Store = store
		return avsstandin.Open(ctx, o)
	}
	e := serve(t, clock, sandboxtest.Open(t, open, store))
	a := e.create("a", `,"parent_id":7`)
	b := e.create("b", "")
	code, body := e.api(http.MethodPost, fmt.Sprintf("/%d/tag", b.ID), `{"content":"x","tag_class_id":9}`)
	require.Equal(t, http.StatusOK, code, body)
	code, body = e.api(http.MethodDelete, fmt.Sprintf("/7/child/%d", a.ID), "")
	require.Equal(t, http.StatusOK, code, body)
	code, body = e.api(http.MethodDelete, fmt.Sprintf("/%d", a.ID), "")
	require.Equal(t, http.StatusOK, code, body)
	clock.Advance(time.Hour)

	restarted := sandboxtest.Reopen(t, open, store, e.st.Snapshot())
	e2 := serve(t, clock, restarted)
	code, body = e2.api(http.MethodGet, fmt.Sprintf("/%d", b.ID), "")
	require.Equal(t, http.StatusOK, code, body)
	var got avsstandin.Evaluation
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	assert.Equal(t, []avsstandin.Tag{{Content: "eu", TagClassID: 5}, {Content: "x", TagClassID: 9}}, got.Tags)
	code, _ = e2.api(http.MethodGet, fmt.Sprintf("/%d", a.ID), "")
	assert.Equal(t, http.StatusNotFound, code)
	c := e2.create("c", "")
	assert.Equal(t, b.ID+1, c.ID, "IDs are not given twice")
	snap := e2.st.Snapshot()
	assert.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1}, snap.CreatesByName)
	assert.Equal(t, map[string]int{"a": 1}, snap.DeletesByName)
	assert.Equal(t, map[string]int{"create": 1, "tag": 1, "get": 1}, snap.Evaluations[1].Calls)

	sandboxtest.RequireResetIsDurable(t, e2.st, open, store)
	parents := sandboxtest.Reopen(t, open, store, e2.st.Snapshot()).Snapshot().Evaluations
	require.Len(t, parents, 1)
	assert.Equal(t, int64(7), parents[0].ID, "the parents are back after a reset")
}

// New evaluations take the sequence's next IDs without reading them first; a configured parent
// whose ID the sequence reaches is skipped, not overwritten.
func TestNewIDsSkipConfiguredParents(t *testing.T) {
	clock := sandboxtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := options(clock)
	opts.ParentIDs = []int64{100001, 100002}
	e := serve(t, clock, avsstandin.New(opts))
	ev := e.create("child", "")
	assert.Equal(t, int64(100003), ev.ID)
	code, body := e.api(http.MethodGet, "/100001", "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"name":"parent-100001"`)
}

// What the real API refuses, the stand-in refuses: the wrong method for tags, a list by name, a
// linking endpoint, a numeric threshold, a body not declared JSON, deleting a linked subevaluation.
func TestRefusesWhatTheRealAPIRefuses(t *testing.T) {
	e := newEnv(t)
	ev := e.create("rt", `,"parent_id":7`)
	id := "/" + jsonInt(ev.ID)
	for _, c := range []struct {
		method, path, body string
		want               int
	}{
		{http.MethodPut, id + "/tag", `{"content":"x","tag_class_id":1}`, http.StatusMethodNotAllowed},
		{http.MethodGet, "?name=rt", "", http.StatusMethodNotAllowed},
		{http.MethodPost, "/7/child" + id, "", http.StatusMethodNotAllowed},
		{http.MethodPost, "", `{"name":"n","definition_type":"BASIC","url":"https://x","threshold":30000}`, http.StatusBadRequest},
		{http.MethodDelete, id, "", http.StatusBadRequest},
	} {
		code, body := e.api(c.method, c.path, c.body)
		assert.Equal(t, c.want, code, "%s %s: %s", c.method, c.path, body)
	}
	req := sandboxtest.APIRequest(t, http.MethodPost, e.url+base, e.token, `{"name":"n","definition_type":"BASIC","url":"https://x"}`)
	req.Header.Set("Content-Type", "text/plain")
	code, _ := sandboxtest.Do(t, req)
	assert.Equal(t, http.StatusUnsupportedMediaType, code)
	assert.Equal(t, map[string]int{"rt": 1}, e.st.Snapshot().CreatesByName)
}
