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

const (
	jsonType = "application/json"
	formType = "application/x-www-form-urlencoded"
)

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

func (e *env) sendAs(user, password, method, path, contentType, body string) (*http.Response, string) {
	e.t.Helper()
	req := sandboxtest.Request(e.t, method, e.url+"/ias"+path, body)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	return sandboxtest.Send(e.t, req)
}

func (e *env) send(method, path, contentType, body string) (int, string) {
	e.t.Helper()
	resp, b := e.sendAs("keb", "pw", method, path, contentType, body)
	return resp.StatusCode, b
}

func (e *env) company() iasstandin.Company {
	e.t.Helper()
	code, body := e.send(http.MethodGet, "/service/company/global", "", "")
	require.Equal(e.t, http.StatusOK, code, body)
	var c iasstandin.Company
	require.NoError(e.t, json.Unmarshal([]byte(body), &c))
	return c
}

// create creates a service provider and finds it by display name, as IAS answers without its id.
func (e *env) create(name string) iasstandin.ServiceProvider {
	e.t.Helper()
	code, body := e.send(http.MethodPost, "/service/sps", formType, "sp_name="+name+"&company_id=global")
	require.Equal(e.t, http.StatusCreated, code, body)
	return e.find(name)
}

func (e *env) find(name string) iasstandin.ServiceProvider {
	e.t.Helper()
	for _, sp := range e.company().ServiceProviders {
		if sp.Name == name {
			return sp
		}
	}
	e.t.Fatalf("no service provider %q", name)
	return iasstandin.ServiceProvider{}
}

func (e *env) createSecret(id string) iasstandin.Secret {
	e.t.Helper()
	code, body := e.send(http.MethodPut, "/service/sps", jsonType,
		`{"organization":"global","id":"`+id+`","rest_api_client_secret":{"description":"d","scopes":["ManageApp","OAuth"]}}`)
	require.Equal(e.t, http.StatusCreated, code, body)
	var s iasstandin.Secret
	require.NoError(e.t, json.Unmarshal([]byte(body), &s))
	return s
}

func TestBasicAuth(t *testing.T) {
	e := newEnv(t)
	for _, cred := range [][2]string{{"", ""}, {"keb", "wrong"}, {"other", "pw"}} {
		resp, _ := e.sendAs(cred[0], cred[1], http.MethodGet, "/service/company/global", "", "")
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, cred)
		assert.Equal(t, `Basic realm="ias"`, resp.Header.Get("WWW-Authenticate"))
	}
	resp, _ := e.sendAs("keb", "wrong", http.MethodPost, "/service/sps", formType, "sp_name=x&company_id=global")
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Empty(t, e.company().ServiceProviders)
	assert.Equal(t, 4, e.st.Snapshot().Calls["unauthorized"])
}

func TestCreateFromAFormAndListInTheCompany(t *testing.T) {
	e := newEnv(t)
	sp := e.create("kyma-runtime-1")
	assert.NotEmpty(t, sp.ID)
	assert.NotEmpty(t, sp.UserForRest)
	assert.NotEqual(t, sp.ID, sp.UserForRest)
	assert.Equal(t, iasstandin.SSOTypeSAML2, sp.SSOType)
	assert.Empty(t, sp.ClientSecrets)
	assert.Equal(t, "global", sp.Organization)
	assert.Equal(t, iasstandin.DefaultIdentityProviders, e.company().IdentityProviders)

	// The listing has the real field names.
	_, body := e.send(http.MethodGet, "/service/company/global", "", "")
	for _, field := range []string{`"service_providers"`, `"identity_providers"`, `"display_name"`, `"userForRest"`, `"clientSecrets"`, `"ssoType"`} {
		assert.Contains(t, body, field)
	}
	snap := e.st.Snapshot()
	require.Len(t, snap.ServiceProviders, 1)
	assert.Equal(t, map[string]int{"kyma-runtime-1": 1}, snap.CreatesByName)
}

func TestCreateRejects(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name, contentType, body string
		code                    int
	}{
		{"JSON", jsonType, `{"sp_name":"a","company_id":"global"}`, http.StatusUnsupportedMediaType},
		{"no content type", "", "sp_name=a&company_id=global", http.StatusUnsupportedMediaType},
		{"no sp_name", formType, "company_id=global", http.StatusBadRequest},
		{"empty sp_name", formType, "sp_name=&company_id=global", http.StatusBadRequest},
		{"no company_id", formType, "sp_name=a", http.StatusBadRequest},
		{"another company", formType, "sp_name=a&company_id=acme", http.StatusNotFound},
		{"an unknown field", formType, "sp_name=a&company_id=global&sso_type=openIdConnect", http.StatusBadRequest},
		{"a name too long", formType, "sp_name=" + strings.Repeat("a", 256) + "&company_id=global", http.StatusBadRequest},
	} {
		code, body := e.send(http.MethodPost, "/service/sps", tc.contentType, tc.body)
		assert.Equal(t, tc.code, code, "%s: %s", tc.name, body)
	}
	assert.Empty(t, e.company().ServiceProviders)
	assert.Empty(t, e.st.Snapshot().CreatesByName)
}

// The requests of the broker's earlier client, which the real IAS does not serve.
func TestOldRequestsAreRejected(t *testing.T) {
	e := newEnv(t)
	sp := e.create("a")
	for _, tc := range []struct{ method, path, contentType, body string }{
		{http.MethodGet, "/service/sps?sp_name=a", "", ""},
		{http.MethodGet, "/service/sps/" + sp.ID, "", ""},
		{http.MethodDelete, "/service/sps/" + sp.ID, "", ""},
		{http.MethodPost, "/service/sps/" + sp.ID + "/rba", jsonType, `{"subject_name_identifier":"mail"}`},
		{http.MethodPost, "/service/sps/" + sp.ID + "/client-secrets", "", ""},
		{http.MethodDelete, "/service/sps/" + sp.ID + "/client-secrets", "", ""},
		{http.MethodPut, "/service/sps", jsonType, `{"id":"` + sp.ID + `","sso_type":"openIdConnect","redirect_uris":["https://x.example/cb"]}`},
		{http.MethodPut, "/service/sps/" + sp.ID, jsonType, `{"sso_type":"openIdConnect"}`},
		{http.MethodPut, "/service/sps/" + sp.ID, jsonType, `{"subject_name_identifier":"mail"}`},
		{http.MethodPut, "/service/sps/" + sp.ID, jsonType, `{"assertion_attributes":[{"assertion_attribute_name":"email","user_attribute_name":"mail"}]}`},
	} {
		code, body := e.send(tc.method, tc.path, tc.contentType, tc.body)
		assert.GreaterOrEqual(t, code, 400, "%s %s %s: %s", tc.method, tc.path, tc.body, body)
		assert.Less(t, code, 500, "%s %s %s: %s", tc.method, tc.path, tc.body, body)
	}
	got := e.find("a")
	assert.Equal(t, sp, got, "nothing changed")
}

func TestConfigure(t *testing.T) {
	e := newEnv(t)
	sp := e.create("a")
	path := "/service/sps/" + sp.ID
	for _, body := range []string{
		`{"ssoType":"openIdConnect","openId_connect_configuration":{"redirect_uris":["https://g.example/cb"],"post_logout_redirect_uris":["https://g.example/out"]}}`,
		`{"assertion_attributes":[{"assertionAttribute":"email","userAttribute":"mail"}]}`,
		`{"name_id_attribute":"mail"}`,
	} {
		code, out := e.send(http.MethodPut, path, jsonType, body)
		require.Equal(t, http.StatusOK, code, out)
	}
	got := e.find("a")
	assert.Equal(t, iasstandin.SSOTypeOpenIDConnect, got.SSOType)
	assert.Equal(t, []string{"https://g.example/cb"}, got.RedirectURIs)
	assert.Equal(t, []string{"https://g.example/out"}, got.PostLogoutRedirectURIs)
	assert.Equal(t, []iasstandin.AssertionAttribute{{AssertionAttribute: "email", UserAttribute: "mail"}}, got.AssertionAttributes)
	assert.Equal(t, "mail", got.NameIDAttribute)

	for _, tc := range []struct {
		name, contentType, body string
		code                    int
	}{
		{"a form", formType, "ssoType=openIdConnect", http.StatusUnsupportedMediaType},
		{"nothing set", jsonType, `{}`, http.StatusBadRequest},
		{"an unknown field", jsonType, `{"ssoType":"openIdConnect","sso_type":"openIdConnect"}`, http.StatusBadRequest},
		{"an unknown SSO type", jsonType, `{"ssoType":"oauth"}`, http.StatusBadRequest},
		{"no redirect_uris", jsonType, `{"openId_connect_configuration":{}}`, http.StatusBadRequest},
		{"a relative redirect URI", jsonType, `{"openId_connect_configuration":{"redirect_uris":["/cb"]}}`, http.StatusBadRequest},
		{"half an assertion attribute", jsonType, `{"assertion_attributes":[{"assertionAttribute":"email"}]}`, http.StatusBadRequest},
		{"an unknown name_id_attribute", jsonType, `{"name_id_attribute":"phone"}`, http.StatusBadRequest},
		{"not JSON", jsonType, `{`, http.StatusBadRequest},
	} {
		code, body := e.send(http.MethodPut, path, tc.contentType, tc.body)
		assert.Equal(t, tc.code, code, "%s: %s", tc.name, body)
	}
	assert.Equal(t, got, e.find("a"), "rejected requests change nothing")
	code, _ := e.send(http.MethodPut, "/service/sps/missing", jsonType, `{"name_id_attribute":"mail"}`)
	assert.Equal(t, http.StatusNotFound, code)
}

func TestRBA(t *testing.T) {
	e := newEnv(t)
	sp := e.create("a")
	path := "/service/sps/" + sp.ID + "/rba"
	code, body := e.send(http.MethodPut, path, jsonType,
		`{"service_provider":{"rba_config":{"rba_rules":[{"action":"Allow","group":"admins","group_type":"Cloud"}],"default_action":"Deny"}}}`)
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, iasstandin.RBAConfig{RBARules: []iasstandin.RBARule{{Action: "Allow", Group: "admins", GroupType: "Cloud"}}, DefaultAction: "Deny"},
		e.find("a").RBAConfig)

	for _, tc := range []struct{ name, body string }{
		{"no service_provider", `{}`},
		{"no rba_config", `{"service_provider":{}}`},
		{"an unknown default action", `{"service_provider":{"rba_config":{"rba_rules":[],"default_action":"Maybe"}}}`},
		{"an unknown group type", `{"service_provider":{"rba_config":{"rba_rules":[{"action":"Allow","group":"g","group_type":"Local"}],"default_action":"Deny"}}}`},
		{"an unknown field", `{"service_provider":{"rba_config":{"rba_rules":[],"default_action":"Deny","extra":1}}}`},
	} {
		code, body := e.send(http.MethodPut, path, jsonType, tc.body)
		assert.Equal(t, http.StatusBadRequest, code, "%s: %s", tc.name, body)
	}
	code, _ = e.send(http.MethodPut, path, formType, "default_action=Deny")
	assert.Equal(t, http.StatusUnsupportedMediaType, code)
}

func TestDefaultIdentityProvider(t *testing.T) {
	e := newEnv(t)
	sp := e.create("a")
	idp := iasstandin.DefaultIdentityProviders[0]
	code, body := e.send(http.MethodPut, "/service/sps", jsonType,
		`{"organization":"global","id":"`+sp.ID+`","default_auth_idp":"https://ias.example/service/idp/`+idp.ID+`"}`)
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, &idp, e.find("a").AuthenticatingIdp)

	for _, tc := range []struct {
		name, body string
		code       int
	}{
		{"an unknown identity provider", `{"organization":"global","id":"` + sp.ID + `","default_auth_idp":"https://ias.example/service/idp/nope"}`, http.StatusBadRequest},
		{"a name, not a URL", `{"organization":"global","id":"` + sp.ID + `","default_auth_idp":"` + idp.Name + `"}`, http.StatusBadRequest},
		{"another organization", `{"organization":"acme","id":"` + sp.ID + `","default_auth_idp":"https://ias.example/service/idp/` + idp.ID + `"}`, http.StatusBadRequest},
		{"no id", `{"organization":"global","default_auth_idp":"https://ias.example/service/idp/` + idp.ID + `"}`, http.StatusBadRequest},
		{"neither setting", `{"organization":"global","id":"` + sp.ID + `"}`, http.StatusBadRequest},
		{"an unknown field", `{"organization":"global","id":"` + sp.ID + `","default_authenticating_idp":"x"}`, http.StatusBadRequest},
		{"a missing service provider", `{"organization":"global","id":"missing","default_auth_idp":"https://ias.example/service/idp/` + idp.ID + `"}`, http.StatusNotFound},
	} {
		code, body := e.send(http.MethodPut, "/service/sps", jsonType, tc.body)
		assert.Equal(t, tc.code, code, "%s: %s", tc.name, body)
	}
}

func TestClientSecrets(t *testing.T) {
	e := newEnv(t)
	sp := e.create("a")
	first, second := e.createSecret(sp.ID), e.createSecret(sp.ID)
	assert.Equal(t, sp.UserForRest, first.ClientID, "the client id is the service provider's userForRest")
	assert.NotEqual(t, first.ClientSecret, second.ClientSecret)
	assert.True(t, e.st.HasSecret(sp.UserForRest, first.ClientSecret))
	assert.True(t, e.st.HasSecret(sp.UserForRest, second.ClientSecret))
	listed := e.find("a").ClientSecrets
	require.Len(t, listed, 2, "each creation adds a secret")
	assert.Equal(t, "d", listed[0].Description)
	assert.Equal(t, 2, e.st.Snapshot().ServiceProviders[0].Secrets)
	assert.NotContains(t, mustJSON(t, e.company()), first.ClientSecret, "the listing has no secret values")

	for _, tc := range []struct {
		name, contentType, body string
		code                    int
	}{
		{"no scopes", jsonType, `{"organization":"global","id":"` + sp.ID + `","rest_api_client_secret":{"description":"d"}}`, http.StatusBadRequest},
		{"an unknown scope", jsonType, `{"organization":"global","id":"` + sp.ID + `","rest_api_client_secret":{"description":"d","scopes":["Everything"]}}`, http.StatusBadRequest},
		{"both settings", jsonType, `{"organization":"global","id":"` + sp.ID + `","default_auth_idp":"x","rest_api_client_secret":{"scopes":["OAuth"]}}`, http.StatusBadRequest},
		{"a form", formType, "id=" + sp.ID, http.StatusUnsupportedMediaType},
	} {
		code, body := e.send(http.MethodPut, "/service/sps", tc.contentType, tc.body)
		assert.Equal(t, tc.code, code, "%s: %s", tc.name, body)
	}

	for _, tc := range []struct {
		name, contentType, body string
		code                    int
	}{
		{"no clientId", jsonType, `{"clientSecretsIds":["` + listed[0].ID + `"]}`, http.StatusBadRequest},
		{"no clientSecretsIds", jsonType, `{"clientId":"` + sp.UserForRest + `"}`, http.StatusBadRequest},
		{"the service provider's id", jsonType, `{"clientId":"` + sp.ID + `","clientSecretsIds":["` + listed[0].ID + `"]}`, http.StatusNotFound},
		{"an unknown field", jsonType, `{"clientId":"` + sp.UserForRest + `","clientSecretsIds":["` + listed[0].ID + `"],"all":true}`, http.StatusBadRequest},
		{"no content type", "", `{"clientId":"` + sp.UserForRest + `","clientSecretsIds":["` + listed[0].ID + `"]}`, http.StatusUnsupportedMediaType},
	} {
		code, body := e.send(http.MethodDelete, "/service/sps/clientSecret", tc.contentType, tc.body)
		assert.Equal(t, tc.code, code, "%s: %s", tc.name, body)
	}
	require.Len(t, e.find("a").ClientSecrets, 2, "rejected deletions delete nothing")

	code, body := e.send(http.MethodDelete, "/service/sps/clientSecret", jsonType,
		`{"clientId":"`+sp.UserForRest+`","clientSecretsIds":["`+listed[0].ID+`"]}`)
	require.Equal(t, http.StatusNoContent, code, body)
	assert.False(t, e.st.HasSecret(sp.UserForRest, first.ClientSecret))
	assert.True(t, e.st.HasSecret(sp.UserForRest, second.ClientSecret))
	assert.Len(t, e.find("a").ClientSecrets, 1)
}

func TestDelete(t *testing.T) {
	e := newEnv(t)
	sp := e.create("a")
	code, body := e.send(http.MethodPut, "/service/sps/delete", "", "")
	assert.Equal(t, http.StatusBadRequest, code, "sp_id is required: %s", body)
	code, body = e.send(http.MethodPut, "/service/sps/delete?sp_id="+sp.ID, "", "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Empty(t, e.company().ServiceProviders)
	code, _ = e.send(http.MethodPut, "/service/sps/delete?sp_id="+sp.ID, "", "")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, map[string]int{"a": 1}, e.st.Snapshot().DeletesByName)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func TestObjectsEndpoint(t *testing.T) {
	e := newEnv(t)
	e.create("a")
	resp, out := sandboxtest.Send(t, sandboxtest.Request(t, http.MethodGet, e.url+"/_sandbox/ias/objects", ""))
	require.Equal(t, http.StatusOK, resp.StatusCode, out)
	var objs iasstandin.Objects
	require.NoError(t, json.Unmarshal([]byte(out), &objs))
	require.Len(t, objs.ServiceProviders, 1)
	assert.Equal(t, "a", objs.ServiceProviders[0].Name)
	assert.Equal(t, 1, objs.ServiceProviders[0].Calls["create"])
}

func TestStateSurvivesARestart(t *testing.T) {
	store := durable.NewMemoryStore()
	open := func(ctx context.Context, store durable.Store) (*iasstandin.StandIn, error) {
		return iasstandin.Open(ctx, iasstandin.Options{User: "keb", Password: "pw", Store: store})
	}
	e := &env{t: t, st: sandboxtest.Open(t, open, store)}
	_, e.url = sandboxtest.Serve(t, sandbox.Options{}, e.st)
	sp := e.create("a")
	gone := e.create("b")
	e.create("c")
	code, body := e.send(http.MethodPut, "/service/sps/"+sp.ID, jsonType, `{"ssoType":"openIdConnect","openId_connect_configuration":{"redirect_uris":["https://x.example/cb"]}}`)
	require.Equal(t, http.StatusOK, code, body)
	secret := e.createSecret(sp.ID)
	code, _ = e.send(http.MethodPut, "/service/sps/delete?sp_id="+gone.ID, "", "")
	require.Equal(t, http.StatusOK, code)
	e.sendAs("keb", "wrong", http.MethodGet, "/service/company/global", "", "")

	restarted := sandboxtest.Reopen(t, open, store, e.st.Snapshot())
	assert.True(t, restarted.HasSecret(sp.UserForRest, secret.ClientSecret), "the secret is still valid")
	e2 := &env{t: t, st: restarted}
	_, e2.url = sandboxtest.Serve(t, sandbox.Options{}, restarted)
	got := e2.find("a")
	assert.Equal(t, []string{"https://x.example/cb"}, got.RedirectURIs)
	code, _ = e2.send(http.MethodPut, "/service/sps/delete?sp_id="+gone.ID, "", "")
	assert.Equal(t, http.StatusNotFound, code, "a deleted service provider stays deleted")
	code, body = e2.send(http.MethodDelete, "/service/sps/clientSecret", jsonType,
		`{"clientId":"`+sp.UserForRest+`","clientSecretsIds":["`+got.ClientSecrets[0].ID+`"]}`)
	require.Equal(t, http.StatusNoContent, code, body)
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
	assert.False(t, restarted.HasSecret(sp.UserForRest, secret.ClientSecret), "deleted secrets stay deleted")
	sandboxtest.RequireResetIsDurable(t, restarted, open, store)
}
