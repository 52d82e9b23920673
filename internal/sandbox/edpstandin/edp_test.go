package edpstandin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/edpstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const base = "/edp/namespaces/kyma/dataTenants"

// scope is what the broker's token requests ask for.
const scope = "edp-namespace.read edp-namespace.update"

type env struct {
	t     *testing.T
	st    *edpstandin.StandIn
	sb    *sandbox.Sandbox
	url   string
	clock *sandboxtest.Clock
	token string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clock := sandboxtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return serve(t, clock, edpstandin.New(options(clock)))
}

func options(clock *sandboxtest.Clock) edpstandin.Options {
	return edpstandin.Options{ClientID: "id", ClientSecret: "secret", Namespaces: []string{"kyma"}, TokenTTL: time.Minute, Now: clock.Now}
}

// serve serves the stand-in and takes a token.
func serve(t *testing.T, clock *sandboxtest.Clock, st *edpstandin.StandIn) *env {
	t.Helper()
	e := &env{t: t, clock: clock, st: st}
	e.sb, e.url = sandboxtest.Serve(t, sandbox.Options{}, e.st)
	tok := sandboxtest.Token(t, e.url+"/edp/oauth/token", url.Values{"grant_type": {"client_credentials"}, "client_id": {"id"}, "client_secret": {"secret"}, "scope": {scope}})
	assert.Equal(t, "bearer", tok.TokenType)
	assert.Equal(t, 60, tok.ExpiresIn)
	e.token = tok.AccessToken
	return e
}

func (e *env) tokenRequest(form url.Values, basic ...string) (int, string) {
	return sandboxtest.PostForm(e.t, e.url+"/edp/oauth/token", form, basic...)
}

func (e *env) api(method, path, body string) (int, string) {
	e.t.Helper()
	return sandboxtest.Do(e.t, sandboxtest.APIRequest(e.t, method, e.url+path, e.token, body))
}

func TestTokenEndpoint(t *testing.T) {
	e := newEnv(t)
	code, body := e.tokenRequest(url.Values{"grant_type": {"client_credentials"}, "scope": {scope}}, "id", "secret")
	assert.Equal(t, http.StatusOK, code, "credentials in a basic auth header: %s", body)
	code, body = e.tokenRequest(url.Values{"grant_type": {"client_credentials"}, "scope": {"edp-namespace.update edp-namespace.read openid"}}, "id", "secret")
	assert.Equal(t, http.StatusOK, code, "the scopes in any order, with others: %s", body)
	for _, sc := range []string{"", "edp-namespace.read", "edp-namespace.update"} {
		code, body = e.tokenRequest(url.Values{"grant_type": {"client_credentials"}, "scope": {sc}}, "id", "secret")
		assert.Equal(t, http.StatusBadRequest, code, "scope %q", sc)
		assert.Contains(t, body, "invalid_scope")
	}
	assert.Equal(t, 3, e.st.Snapshot().Calls["invalid_scope"])
	code, body = e.tokenRequest(url.Values{"grant_type": {"client_credentials"}, "client_id": {"id"}, "client_secret": {"wrong"}, "scope": {scope}})
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, body, "invalid_client")
	code, body = e.tokenRequest(url.Values{"grant_type": {"password"}, "scope": {scope}}, "id", "secret")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "unsupported_grant_type")
	assert.Equal(t, 1, e.st.Snapshot().Calls["token.rejected"])
}

func TestAPIRequiresBearerToken(t *testing.T) {
	e := newEnv(t)
	for _, auth := range []string{"", "Bearer nope", "Basic " + e.token} {
		req := sandboxtest.Request(t, http.MethodPost, e.url+base, `{"name":"sa","environment":"prod","secret":"c2VjcmV0"}`)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		code, _ := sandboxtest.Do(t, req)
		assert.Equal(t, http.StatusUnauthorized, code, auth)
	}
	assert.Empty(t, e.st.Snapshot().DataTenants)
	e.clock.Advance(2 * time.Minute)
	code, _ := e.api(http.MethodPost, base, `{"name":"sa","environment":"prod","secret":"c2VjcmV0"}`)
	assert.Equal(t, http.StatusUnauthorized, code, "expired token")
	assert.Equal(t, 4, e.st.Snapshot().Calls["unauthorized"])
}

func TestDataTenantLifecycle(t *testing.T) {
	e := newEnv(t)
	code, body := e.api(http.MethodPost, base, `{"name":"sa-1","environment":"prod","secret":"c2VjcmV0"}`)
	require.Equal(t, http.StatusCreated, code, body)
	var dt edpstandin.DataTenant
	require.NoError(t, json.Unmarshal([]byte(body), &dt))
	assert.Equal(t, edpstandin.DataTenant{Namespace: edpstandin.Namespace{Name: "kyma"}, Name: "sa-1", Environment: "prod",
		CreatedAt: e.clock.Now().UnixMilli()}, dt)

	code, body = e.api(http.MethodPost, base, `{"name":"sa-1","environment":"prod","secret":"c2VjcmV0"}`)
	assert.Equal(t, http.StatusConflict, code, body)
	code, _ = e.api(http.MethodPost, base, `{"name":"sa-1","environment":"dev","secret":"c2VjcmV0"}`)
	assert.Equal(t, http.StatusCreated, code, "another environment is another data tenant")

	code, body = e.api(http.MethodGet, base+"/sa-1/prod", "")
	require.Equal(t, http.StatusOK, code)
	var got edpstandin.DataTenant
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	assert.Equal(t, dt, got)

	// metadata: create, 409 for an existing key, list, delete
	code, body = e.api(http.MethodPost, base+"/sa-1/prod/metadata", `{"key":"plan","value":"azure"}`)
	require.Equal(t, http.StatusCreated, code, body)
	var item edpstandin.MetadataItem
	require.NoError(t, json.Unmarshal([]byte(body), &item))
	assert.Equal(t, edpstandin.MetadataItem{DataTenant: dt, Key: "plan", Value: "azure"}, item)
	code, _ = e.api(http.MethodPost, base+"/sa-1/prod/metadata", `{"key":"plan","value":"aws"}`)
	assert.Equal(t, http.StatusConflict, code, "an existing key")
	code, _ = e.api(http.MethodPost, base+"/sa-1/prod/metadata", `{"key":"region","value":"westeurope"}`)
	assert.Equal(t, http.StatusCreated, code)
	code, body = e.api(http.MethodGet, base+"/sa-1/prod/metadata", "")
	require.Equal(t, http.StatusOK, code)
	var items []edpstandin.MetadataItem
	require.NoError(t, json.Unmarshal([]byte(body), &items))
	assert.Equal(t, []edpstandin.MetadataItem{{DataTenant: dt, Key: "plan", Value: "azure"}, {DataTenant: dt, Key: "region", Value: "westeurope"}}, items)
	code, _ = e.api(http.MethodDelete, base+"/sa-1/prod/metadata/plan", "")
	assert.Equal(t, http.StatusNoContent, code)
	code, _ = e.api(http.MethodDelete, base+"/sa-1/prod/metadata/plan", "")
	assert.Equal(t, http.StatusNotFound, code)

	snap := e.st.Snapshot()
	require.Len(t, snap.DataTenants, 2)
	assert.Equal(t, "dev", snap.DataTenants[0].Environment)
	obj := snap.DataTenants[1]
	assert.Equal(t, map[string]string{"region": "westeurope"}, obj.Metadata)
	assert.Equal(t, map[string]int{"create": 2, "get": 1, "metadata.set": 3, "metadata.list": 1, "metadata.delete": 2}, obj.Calls)

	// deletion takes the metadata with it, then 404
	code, _ = e.api(http.MethodDelete, base+"/sa-1/prod", "")
	assert.Equal(t, http.StatusNoContent, code)
	for _, req := range [][2]string{{http.MethodDelete, ""}, {http.MethodGet, ""}, {http.MethodGet, "/metadata"},
		{http.MethodDelete, "/metadata/region"}} {
		code, _ = e.api(req[0], base+"/sa-1/prod"+req[1], "")
		assert.Equal(t, http.StatusNotFound, code, req)
	}
	code, _ = e.api(http.MethodPost, base+"/sa-1/prod/metadata", `{"key":"plan","value":"aws"}`)
	assert.Equal(t, http.StatusNotFound, code)

	snap = e.st.Snapshot()
	require.Len(t, snap.DataTenants, 1)
	assert.Equal(t, map[string]int{"kyma/sa-1/prod": 1, "kyma/sa-1/dev": 1}, snap.CreatesByTenant)
	assert.Equal(t, map[string]int{"kyma/sa-1/prod": 1}, snap.DeletesByTenant)
	assert.Equal(t, 3, snap.Calls["create"])
	assert.Equal(t, 2, snap.Calls["delete"])
}

func TestValidationAndNamespaces(t *testing.T) {
	e := newEnv(t)
	for _, body := range []string{`{"environment":"prod","secret":"c2VjcmV0"}`, `{"name":"sa"}`, `{"name":" ","environment":"prod","secret":"c2VjcmV0"}`,
		`{"name":"a/b","environment":"prod","secret":"c2VjcmV0"}`, `{"name":`} {
		code, resp := e.api(http.MethodPost, base, body)
		assert.Equal(t, http.StatusBadRequest, code, "%s: %s", body, resp)
	}
	code, _ := e.api(http.MethodPost, "/edp/namespaces/other/dataTenants", `{"name":"sa","environment":"prod","secret":"c2VjcmV0"}`)
	assert.Equal(t, http.StatusNotFound, code, "unknown namespace")
	code, _ = e.api(http.MethodGet, "/edp/namespaces/other/dataTenants/sa/prod", "")
	assert.Equal(t, http.StatusNotFound, code)

	code, _ = e.api(http.MethodPost, base, `{"name":"sa","environment":"prod","secret":"c2VjcmV0"}`)
	require.Equal(t, http.StatusCreated, code)
	for _, body := range []string{`{"value":"x"}`, `{"key":"a/b","value":"x"}`, `{"key":`} {
		code, resp := e.api(http.MethodPost, base+"/sa/prod/metadata", body)
		assert.Equal(t, http.StatusBadRequest, code, "%s: %s", body, resp)
	}
	snap := e.st.Snapshot()
	require.Len(t, snap.DataTenants, 1)
	assert.Empty(t, snap.DataTenants[0].Metadata)
	assert.Equal(t, map[string]int{"kyma/sa/prod": 1}, snap.CreatesByTenant)

	// without configured namespaces every namespace exists
	open := edpstandin.New(edpstandin.Options{ClientID: "id", ClientSecret: "secret"})
	rec := httptest.NewRecorder()
	tokReq := httptest.NewRequest(http.MethodPost, "/oauth/token", strings.NewReader("grant_type=client_credentials&scope="+url.QueryEscape(scope)))
	tokReq.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	tokReq.SetBasicAuth("id", "secret")
	open.ServeHTTP(rec, tokReq)
	require.Equal(t, http.StatusOK, rec.Code)
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &tok))
	rec = httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/namespaces/anything/dataTenants", strings.NewReader(`{"name":"sa","environment":"prod","secret":"c2VjcmV0"}`))
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	req.Header.Set("Content-Type", "application/json")
	open.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
}

// What EDP does not take from the broker: another content type, a data tenant without its secret,
// unknown fields, values of maasConsumerEnvironment and maasConsumerServicePlan other than EDP's.
func TestRejectsWhatEDPRejects(t *testing.T) {
	e := newEnv(t)
	send := func(path, contentType, body string) (int, string) {
		req := sandboxtest.APIRequest(t, http.MethodPost, e.url+path, e.token, body)
		req.Header.Set("Content-Type", contentType)
		return sandboxtest.Do(t, req)
	}
	for _, tc := range []struct {
		name, contentType, body string
		code                    int
	}{
		{"no secret", "application/json", `{"name":"sa","environment":"prod"}`, http.StatusBadRequest},
		{"an empty secret", "application/json", `{"name":"sa","environment":"prod","secret":""}`, http.StatusBadRequest},
		{"an unknown field", "application/json", `{"name":"sa","environment":"prod","secret":"x","namespace":"kyma"}`, http.StatusBadRequest},
		{"a form", "application/x-www-form-urlencoded", "name=sa&environment=prod&secret=x", http.StatusUnsupportedMediaType},
		{"text", "text/plain", `{"name":"sa","environment":"prod","secret":"x"}`, http.StatusUnsupportedMediaType},
	} {
		code, body := send(base, tc.contentType, tc.body)
		assert.Equal(t, tc.code, code, "%s: %s", tc.name, body)
	}
	assert.Empty(t, e.st.Snapshot().DataTenants)

	code, body := send(base, "application/json", `{"name":"sa","environment":"prod","secret":"x"}`)
	require.Equal(t, http.StatusCreated, code, body)
	for _, tc := range []struct {
		name, contentType, body string
		code                    int
	}{
		{"the landscape as environment", "application/json", `{"key":"maasConsumerEnvironment","value":"prod"}`, http.StatusBadRequest},
		{"a lower case environment", "application/json", `{"key":"maasConsumerEnvironment","value":"cf"}`, http.StatusBadRequest},
		{"the plan name as service plan", "application/json", `{"key":"maasConsumerServicePlan","value":"azure"}`, http.StatusBadRequest},
		{"an unknown field", "application/json", `{"key":"maasConsumerRegion","value":"cf-eu10","tenant":"sa"}`, http.StatusBadRequest},
		{"text", "text/plain", `{"key":"maasConsumerRegion","value":"cf-eu10"}`, http.StatusUnsupportedMediaType},
	} {
		code, body := send(base+"/sa/prod/metadata", tc.contentType, tc.body)
		assert.Equal(t, tc.code, code, "%s: %s", tc.name, body)
	}
	assert.Empty(t, e.st.Snapshot().DataTenants[0].Metadata)
	for _, v := range []string{"CF", "KUBERNETES", "NEO"} {
		code, body := send(base+"/sa/prod/metadata", "application/json", `{"key":"maasConsumerEnvironment","value":"`+v+`"}`)
		assert.Equal(t, http.StatusCreated, code, body)
		code, _ = e.api(http.MethodDelete, base+"/sa/prod/metadata/maasConsumerEnvironment", "")
		require.Equal(t, http.StatusNoContent, code)
	}
	for _, v := range []string{"free", "tdd", "standard"} {
		code, body := send(base+"/sa/prod/metadata", "application/json", `{"key":"maasConsumerServicePlan","value":"`+v+`"}`)
		assert.Equal(t, http.StatusCreated, code, body)
		code, _ = e.api(http.MethodDelete, base+"/sa/prod/metadata/maasConsumerServicePlan", "")
		require.Equal(t, http.StatusNoContent, code)
	}
}

func TestObjectsEndpointAndReset(t *testing.T) {
	e := newEnv(t)
	code, _ := e.api(http.MethodPost, base, `{"name":"sa","environment":"prod","secret":"c2VjcmV0"}`)
	require.Equal(t, http.StatusCreated, code)
	code, _ = e.api(http.MethodPost, base+"/sa/prod/metadata", `{"key":"serviceID","value":"47c9dcbf"}`)
	require.Equal(t, http.StatusCreated, code)

	code, body := sandboxtest.Do(t, sandboxtest.Request(t, http.MethodGet, e.url+"/_sandbox/edp/objects", ""))
	require.Equal(t, http.StatusOK, code)
	var objs edpstandin.Objects
	require.NoError(t, json.Unmarshal([]byte(body), &objs))
	require.Len(t, objs.DataTenants, 1)
	assert.Equal(t, map[string]string{"serviceID": "47c9dcbf"}, objs.DataTenants[0].Metadata)
	assert.Equal(t, map[string]int{"create": 1, "metadata.set": 1}, objs.DataTenants[0].Calls)
	assert.Equal(t, map[string]int{"kyma/sa/prod": 1}, objs.CreatesByTenant)

	code, _ = sandboxtest.Do(t, sandboxtest.Request(t, http.MethodPost, e.url+"/_sandbox/edp/reset", ""))
	require.Equal(t, http.StatusNoContent, code)
	snap := e.st.Snapshot()
	assert.Empty(t, snap.DataTenants)
	assert.Empty(t, snap.CreatesByTenant)
	code, _ = e.api(http.MethodGet, base+"/sa/prod", "")
	assert.Equal(t, http.StatusNotFound, code, "tokens survive a reset")
}

func TestFaultedCallsCreateNothing(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.sb.SetFaults(edpstandin.Name, sandbox.Faults{ErrorRate: 1}))
	for range 10 {
		code, _ := e.api(http.MethodPost, base, `{"name":"sa","environment":"prod","secret":"c2VjcmV0"}`)
		assert.Contains(t, []int{500, 503}, code)
	}
	snap := e.st.Snapshot()
	assert.Empty(t, snap.DataTenants)
	assert.Zero(t, snap.Calls["create"])
}

func TestStateSurvivesARestart(t *testing.T) {
	store := durable.NewMemoryStore()
	clock := sandboxtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func(ctx context.Context, store durable.Store) (*edpstandin.StandIn, error) {
		o := options(clock)
		o.Store = store
		return edpstandin.Open(ctx, o)
	}
	e := serve(t, clock, sandboxtest.Open(t, open, store))
	for _, name := range []string{"sub-1", "sub-2"} {
		code, body := e.api(http.MethodPost, base, `{"name":"`+name+`","environment":"kyma","secret":"c2VjcmV0"}`)
		require.Equal(t, http.StatusCreated, code, body)
	}
	code, body := e.api(http.MethodPost, base+"/sub-1/kyma/metadata", `{"key":"plan","value":"azure"}`)
	require.Equal(t, http.StatusCreated, code, body)
	code, body = e.api(http.MethodPost, base+"/sub-1/kyma/metadata", `{"key":"region","value":"westeurope"}`)
	require.Equal(t, http.StatusCreated, code, body)
	code, _ = e.api(http.MethodDelete, base+"/sub-1/kyma/metadata/region", "")
	require.Equal(t, http.StatusNoContent, code)
	code, _ = e.api(http.MethodDelete, base+"/sub-2/kyma", "")
	require.Equal(t, http.StatusNoContent, code)

	restarted := sandboxtest.Reopen(t, open, store, e.st.Snapshot())
	e2 := serve(t, clock, restarted)
	code, body = e2.api(http.MethodGet, base+"/sub-1/kyma/metadata", "")
	require.Equal(t, http.StatusOK, code)
	var md []edpstandin.MetadataItem
	require.NoError(t, json.Unmarshal([]byte(body), &md))
	require.Len(t, md, 1)
	assert.Equal(t, "azure", md[0].Value)
	code, _ = e2.api(http.MethodPost, base, `{"name":"sub-1","environment":"kyma","secret":"c2VjcmV0"}`)
	assert.Equal(t, http.StatusConflict, code, "the data tenant still exists")
	code, _ = e2.api(http.MethodGet, base+"/sub-2/kyma", "")
	assert.Equal(t, http.StatusNotFound, code, "a deleted data tenant stays deleted")
	snap := e2.st.Snapshot()
	assert.Equal(t, map[string]int{"kyma/sub-1/kyma": 1, "kyma/sub-2/kyma": 1}, snap.CreatesByTenant)
	assert.Equal(t, map[string]int{"kyma/sub-2/kyma": 1}, snap.DeletesByTenant)
	assert.Equal(t, 2, snap.DataTenants[0].Calls["create"])

	sandboxtest.RequireResetIsDurable(t, e2.st, open, store)
}
