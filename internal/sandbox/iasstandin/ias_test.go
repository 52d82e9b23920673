package iasstandin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/iasstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const base = "/ias/service/sps"

type env struct {
	t   *testing.T
	st  *iasstandin.StandIn
	url string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, st: iasstandin.New(iasstandin.Options{User: "keb", Password: "pw"})}
	_, e.url = sandboxtest.Serve(t, sandbox.Options{}, e.st)
	return e
}

func (e *env) apiAs(user, password, method, path, body string) (*http.Response, string) {
	e.t.Helper()
	req := sandboxtest.APIRequest(e.t, method, e.url+base+path, "", body)
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	return sandboxtest.Send(e.t, req)
}

func (e *env) api(method, path, body string) (int, string) {
	e.t.Helper()
	resp, b := e.apiAs("keb", "pw", method, path, body)
	return resp.StatusCode, b
}

func (e *env) create(name string) string {
	e.t.Helper()
	resp, body := e.apiAs("keb", "pw", http.MethodPost, "", `{"sp_name":"`+name+`"}`)
	require.Equal(e.t, http.StatusCreated, resp.StatusCode, body)
	loc := resp.Header.Get("Location")
	require.True(e.t, strings.HasPrefix(loc, "/service/sps/"), loc)
	return strings.TrimPrefix(loc, "/service/sps/")
}

func (e *env) get(id string) iasstandin.ServiceProvider {
	e.t.Helper()
	code, body := e.api(http.MethodGet, "/"+id, "")
	require.Equal(e.t, http.StatusOK, code, body)
	var sp iasstandin.ServiceProvider
	require.NoError(e.t, json.Unmarshal([]byte(body), &sp))
	return sp
}

func TestBasicAuth(t *testing.T) {
	e := newEnv(t)
	for _, cred := range [][2]string{{"", ""}, {"keb", "wrong"}, {"other", "pw"}} {
		resp, _ := e.apiAs(cred[0], cred[1], http.MethodGet, "?sp_name=x", "")
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, cred)
		assert.Equal(t, `Basic realm="ias"`, resp.Header.Get("WWW-Authenticate"))
	}
	resp, _ := e.apiAs("keb", "wrong", http.MethodPost, "", `{"sp_name":"x"}`)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	code, body := e.api(http.MethodGet, "?sp_name=x", "")
	assert.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"service_providers":[]}`, body)
	snap := e.st.Snapshot()
	assert.Equal(t, 4, snap.Calls["unauthorized"])
	assert.Empty(t, snap.CreatesByName)
}

func TestServiceProviderLifecycle(t *testing.T) {
	e := newEnv(t)
	id := e.create("runtime-1")
	sp := e.get(id)
	assert.Equal(t, iasstandin.ServiceProvider{ID: id, Name: "runtime-1", SSOType: iasstandin.SSOTypeSAML2, RedirectURIs: []string{},
		SubjectNameIdentifier: "uid", AssertionAttributes: []iasstandin.AssertionAttribute{},
		OpenIDConnectConfiguration: iasstandin.OIDCConfiguration{PostLogoutRedirectURIs: []string{}}}, sp)

	// search by name, exact match only
	e.create("runtime-10")
	code, body := e.api(http.MethodGet, "?sp_name=runtime-1", "")
	require.Equal(t, http.StatusOK, code)
	var found iasstandin.SearchResult
	require.NoError(t, json.Unmarshal([]byte(body), &found))
	require.Len(t, found.ServiceProviders, 1)
	assert.Equal(t, sp, found.ServiceProviders[0])
	code, body = e.api(http.MethodGet, "", "")
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, json.Unmarshal([]byte(body), &found))
	assert.Len(t, found.ServiceProviders, 2)

	// OIDC configuration
	code, body = e.api(http.MethodPut, "", `{"id":"`+id+`","sso_type":"openIdConnect","redirect_uris":["https://grafana.example/login"],"openid_connect_configuration":{"post_logout_redirect_uris":["https://grafana.example/"]}}`)
	require.Equal(t, http.StatusOK, code, body)
	sp = e.get(id)
	assert.Equal(t, iasstandin.SSOTypeOpenIDConnect, sp.SSOType)
	assert.Equal(t, []string{"https://grafana.example/login"}, sp.RedirectURIs)
	assert.Equal(t, []string{"https://grafana.example/"}, sp.OpenIDConnectConfiguration.PostLogoutRedirectURIs)
	// a partial update keeps the rest
	code, body = e.api(http.MethodPut, "", `{"id":"`+id+`","sso_type":"saml2"}`)
	require.Equal(t, http.StatusOK, code, body)
	sp = e.get(id)
	assert.Equal(t, iasstandin.SSOTypeSAML2, sp.SSOType)
	assert.Equal(t, []string{"https://grafana.example/login"}, sp.RedirectURIs)

	// authentication settings
	code, body = e.api(http.MethodPost, "/"+id+"/rba", `{"subject_name_identifier":"mail","assertion_attributes":[{"assertion_attribute_name":"email","user_attribute_name":"mail"}],"default_authenticating_idp":"idp-1"}`)
	require.Equal(t, http.StatusOK, code, body)
	sp = e.get(id)
	assert.Equal(t, "mail", sp.SubjectNameIdentifier)
	assert.Equal(t, []iasstandin.AssertionAttribute{{AssertionAttributeName: "email", UserAttributeName: "mail"}}, sp.AssertionAttributes)
	assert.Equal(t, "idp-1", sp.DefaultAuthenticatingIDP)

	// client secrets: a new one on every call
	secrets := map[string]bool{}
	for range 2 {
		code, body = e.api(http.MethodPost, "/"+id+"/client-secrets", "")
		require.Equal(t, http.StatusCreated, code, body)
		var s iasstandin.Secret
		require.NoError(t, json.Unmarshal([]byte(body), &s))
		assert.Equal(t, id, s.ClientID)
		assert.NotEmpty(t, s.ClientSecret)
		assert.True(t, e.st.HasSecret(id, s.ClientSecret))
		secrets[s.ClientSecret] = true
	}
	assert.Len(t, secrets, 2)
	assert.Equal(t, 2, e.st.Snapshot().ServiceProviders[0].Secrets)
	code, _ = e.api(http.MethodDelete, "/"+id+"/client-secrets", "")
	assert.Equal(t, http.StatusNoContent, code)
	for s := range secrets {
		assert.False(t, e.st.HasSecret(id, s))
	}

	snap := e.st.Snapshot()
	require.Len(t, snap.ServiceProviders, 2)
	assert.Equal(t, map[string]int{"create": 1, "get": 4, "update": 2, "rba": 1, "createSecret": 2, "deleteSecrets": 1}, snap.ServiceProviders[0].Calls)
	assert.Zero(t, snap.ServiceProviders[0].Secrets)

	// deletion, then 404 everywhere
	code, _ = e.api(http.MethodDelete, "/"+id, "")
	assert.Equal(t, http.StatusNoContent, code)
	for _, c := range []struct{ method, path, body string }{
		{http.MethodDelete, "/" + id, ""},
		{http.MethodGet, "/" + id, ""},
		{http.MethodPut, "", `{"id":"` + id + `","sso_type":"saml2"}`},
		{http.MethodPost, "/" + id + "/rba", `{}`},
		{http.MethodPost, "/" + id + "/client-secrets", ""},
		{http.MethodDelete, "/" + id + "/client-secrets", ""},
	} {
		code, _ = e.api(c.method, c.path, c.body)
		assert.Equal(t, http.StatusNotFound, code, "%s %s", c.method, c.path)
	}
	snap = e.st.Snapshot()
	require.Len(t, snap.ServiceProviders, 1)
	assert.Equal(t, "runtime-10", snap.ServiceProviders[0].Name)
	assert.Equal(t, map[string]int{"runtime-1": 1, "runtime-10": 1}, snap.CreatesByName)
	assert.Equal(t, map[string]int{"runtime-1": 1}, snap.DeletesByName)
}

func TestDuplicateNamesAreCounted(t *testing.T) {
	e := newEnv(t)
	a := e.create("same")
	b := e.create("same")
	assert.NotEqual(t, a, b, "IAS itself does not deduplicate")
	code, body := e.api(http.MethodGet, "?sp_name=same", "")
	require.Equal(t, http.StatusOK, code)
	var found iasstandin.SearchResult
	require.NoError(t, json.Unmarshal([]byte(body), &found))
	require.Len(t, found.ServiceProviders, 2)
	assert.Equal(t, a, found.ServiceProviders[0].ID, "in creation order")
	assert.Equal(t, 2, e.st.Snapshot().CreatesByName["same"])
}

func TestValidation(t *testing.T) {
	e := newEnv(t)
	id := e.create("v")
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, "", `{}`},
		{http.MethodPost, "", `{"sp_name":"  "}`},
		{http.MethodPost, "", `{"sp_name":"` + strings.Repeat("x", 256) + `"}`},
		{http.MethodPost, "", `{"sp_name":`},
		{http.MethodPut, "", `{"sso_type":"saml2"}`},
		{http.MethodPut, "", `{"id":"` + id + `","sso_type":"oauth"}`},
		{http.MethodPut, "", `{"id":"` + id + `","redirect_uris":["/relative"]}`},
		{http.MethodPut, "", `{"id":"` + id + `","openid_connect_configuration":{"post_logout_redirect_uris":["ftp://x"]}}`},
		{http.MethodPost, "/" + id + "/rba", `{"subject_name_identifier":"shoe size"}`},
		{http.MethodPost, "/" + id + "/rba", `{"assertion_attributes":[{"assertion_attribute_name":"x"}]}`},
		{http.MethodPost, "/" + id + "/rba", `{`},
	} {
		code, resp := e.api(c.method, c.path, c.body)
		assert.Equal(t, http.StatusBadRequest, code, "%s %s: %s", c.body, c.path, resp)
	}
	code, _ := e.api(http.MethodPut, "", `{"id":"nope","sso_type":"saml2"}`)
	assert.Equal(t, http.StatusNotFound, code)
	snap := e.st.Snapshot()
	assert.Equal(t, map[string]int{"v": 1}, snap.CreatesByName)
	assert.Equal(t, iasstandin.SSOTypeSAML2, snap.ServiceProviders[0].SSOType, "nothing changed")
	assert.Empty(t, snap.ServiceProviders[0].RedirectURIs)
	assert.Equal(t, "uid", snap.ServiceProviders[0].SubjectNameIdentifier)
}

func TestObjectsEndpointAndReset(t *testing.T) {
	e := newEnv(t)
	e.create("a")
	code, body := sandboxtest.Do(t, sandboxtest.Request(t, http.MethodGet, e.url+"/_sandbox/ias/objects", ""))
	require.Equal(t, http.StatusOK, code)
	var objs iasstandin.Objects
	require.NoError(t, json.Unmarshal([]byte(body), &objs))
	require.Len(t, objs.ServiceProviders, 1)
	assert.Equal(t, "a", objs.ServiceProviders[0].Name)
	assert.Equal(t, map[string]int{"create": 1}, objs.ServiceProviders[0].Calls)
	assert.Equal(t, map[string]int{"a": 1}, objs.CreatesByName)

	code, _ = sandboxtest.Do(t, sandboxtest.Request(t, http.MethodPost, e.url+"/_sandbox/ias/reset", ""))
	require.Equal(t, http.StatusNoContent, code)
	snap := e.st.Snapshot()
	assert.Empty(t, snap.ServiceProviders)
	assert.Empty(t, snap.CreatesByName)
	assert.Empty(t, snap.Calls)
}

func TestStateSurvivesARestart(t *testing.T) {
	store := durable.NewMemoryStore()
	open := func(ctx context.Context, store durable.Store) (*iasstandin.StandIn, error) {
		return iasstandin.Open(ctx, iasstandin.Options{User: "keb", Password: "pw", Store: store})
	}
	e := &env{t: t, st: sandboxtest.Open(t, open, store)}
	_, e.url = sandboxtest.Serve(t, sandbox.Options{}, e.st)
	id := e.create("a")
	gone := e.create("b")
	e.create("c")
	code, body := e.api(http.MethodPut, "", `{"id":"`+id+`","sso_type":"openIdConnect","redirect_uris":["https://x.example/cb"]}`)
	require.Equal(t, http.StatusOK, code, body)
	code, body = e.api(http.MethodPost, "/"+id+"/client-secrets", "")
	require.Equal(t, http.StatusCreated, code, body)
	var secret iasstandin.Secret
	require.NoError(t, json.Unmarshal([]byte(body), &secret))
	code, _ = e.api(http.MethodDelete, "/"+gone, "")
	require.Equal(t, http.StatusNoContent, code)
	e.apiAs("keb", "wrong", http.MethodGet, "", "")

	restarted := sandboxtest.Reopen(t, open, store, e.st.Snapshot())
	assert.True(t, restarted.HasSecret(id, secret.ClientSecret), "the secret is still valid")
	e2 := &env{t: t, st: restarted}
	_, e2.url = sandboxtest.Serve(t, sandbox.Options{}, restarted)
	assert.Equal(t, []string{"https://x.example/cb"}, e2.get(id).RedirectURIs)
	code, _ = e2.api(http.MethodGet, "/"+gone, "")
	assert.Equal(t, http.StatusNotFound, code, "a deleted service provider stays deleted")
	code, _ = e2.api(http.MethodDelete, "/"+id+"/client-secrets", "")
	require.Equal(t, http.StatusNoContent, code)
	e2.create("d")
	snap := e2.st.Snapshot()
	require.Len(t, snap.ServiceProviders, 3)
	assert.Equal(t, []string{"a", "c", "d"}, []string{snap.ServiceProviders[0].Name, snap.ServiceProviders[1].Name, snap.ServiceProviders[2].Name},
		"creation order continues")
	assert.Zero(t, snap.ServiceProviders[0].Secrets)
	assert.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1, "d": 1}, snap.CreatesByName)
	assert.Equal(t, map[string]int{"b": 1}, snap.DeletesByName)
	assert.Equal(t, 1, snap.Calls["unauthorized"])

	restarted = sandboxtest.Reopen(t, open, store, snap)
	assert.False(t, restarted.HasSecret(id, secret.ClientSecret), "deleted secrets stay deleted")
	sandboxtest.RequireResetIsDurable(t, restarted, open, store)
}
