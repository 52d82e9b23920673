package directorstandin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/directorstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
)

// appsOf asks for the applications as the Runtime Agent does: a bundle's credentials are its
// defaultInstanceAuth's credential, a union.
const appsOf = `query($id: ID!) { result: applicationsForRuntime(runtimeID: $id) { data { id name labels auths { id }
	bundles { data { id name defaultInstanceAuth { credential { __typename
		... on BasicCredentialData { username password } ... on OAuthCredentialData { clientId clientSecret url } } } } } } totalCount } }`

// credentialsOf are the credentials of every bundle of every application the runtime sees, by
// application and bundle name.
func (e *env) credentialsOf(tenant, runtimeID string) map[string]map[string]any {
	e.t.Helper()
	d := e.ok(tenant, appsOf, map[string]any{"id": runtimeID})
	out := map[string]map[string]any{}
	for _, a := range d["result"].(map[string]any)["data"].([]any) {
		app := a.(map[string]any)
		byBundle := map[string]any{}
		for _, b := range app["bundles"].(map[string]any)["data"].([]any) {
			bundle := b.(map[string]any)
			byBundle[bundle["name"].(string)] = bundle["defaultInstanceAuth"].(map[string]any)["credential"]
		}
		out[app["name"].(string)] = byBundle
	}
	return out
}

func TestApplicationsAreRegisteredChangedAssignedAndDeleted(t *testing.T) {
	e := newEnv(t)
	rt := e.register("t", "rt", nil)
	app := sandboxtest.RegisterApplication(t, e.url, directorstandin.ApplicationInput{Tenant: "t", Name: "shop",
		Bundles: []directorstandin.Bundle{{Name: "orders"}, {Name: "stock"}}})
	assert.Equal(t, "basic", app.Bundles[0].Auth)
	assert.Empty(t, e.credentialsOf("t", rt), "not assigned yet")
	sandboxtest.AssignApplication(t, e.url, app.ID, rt)
	sandboxtest.AssignApplication(t, e.url, app.ID, rt)
	before := e.credentialsOf("t", rt)
	require.Len(t, before["shop"], 2)
	basic := before["shop"]["orders"].(map[string]any)
	assert.Equal(t, "BasicCredentialData", basic["__typename"])
	assert.NotEmpty(t, basic["username"])
	assert.NotEmpty(t, basic["password"])
	assert.NotContains(t, basic, "clientId", "the OAuth fragment does not apply")

	// a change keeps the bundles it keeps, with their credentials, and gives new ones their own
	changed := sandboxtest.ChangeApplication(t, e.url, app.ID, directorstandin.ApplicationInput{Name: "shop-2", Labels: map[string]any{"tier": "gold"},
		Bundles: []directorstandin.Bundle{{Name: "orders"}, {Name: "payments"}}})
	assert.Equal(t, app.Bundles[0].ID, changed.Bundles[0].ID)
	assert.Equal(t, []string{rt}, changed.Runtimes)
	after := e.credentialsOf("t", rt)
	assert.Equal(t, before["shop"]["orders"], after["shop-2"]["orders"])
	assert.NotEmpty(t, after["shop-2"]["payments"])
	assert.NotContains(t, after["shop-2"], "stock")

	for name, in := range map[string]directorstandin.ApplicationInput{
		"no tenant":      {Name: "x"},
		"no name":        {Tenant: "t"},
		"duplicate name": {Tenant: "t", Name: "shop-2"},
		"bad label":      {Tenant: "t", Name: "x", Labels: map[string]any{"": 1}},
		"bad auth":       {Tenant: "t", Name: "x", Bundles: []directorstandin.Bundle{{Name: "b", Auth: "kerberos"}}},
		"twice a bundle": {Tenant: "t", Name: "x", Bundles: []directorstandin.Bundle{{Name: "b"}, {Name: "b"}}},
		"unnamed bundle": {Tenant: "t", Name: "x", Bundles: []directorstandin.Bundle{{}}},
	} {
		code, _ := sandboxtest.Do(t, sandboxtest.APIRequest(t, http.MethodPost, e.url+"/_sandbox/director/applications", "", mustJSON(t, in)))
		assert.Equal(t, http.StatusBadRequest, code, name)
	}
	code, _ := sandboxtest.Do(t, sandboxtest.APIRequest(t, http.MethodPut, e.url+"/_sandbox/director/applications/"+app.ID, "",
		mustJSON(t, directorstandin.ApplicationInput{Tenant: "u", Name: "shop"})))
	assert.Equal(t, http.StatusBadRequest, code, "moving to another tenant")
	code, _ = sandboxtest.Do(t, sandboxtest.APIRequest(t, http.MethodPut, e.url+"/_sandbox/director/applications/nope/runtimes/"+rt, "", ""))
	assert.Equal(t, http.StatusNotFound, code)

	// unregistering the runtime removes its assignments
	other := e.register("t", "other", nil)
	sandboxtest.AssignApplication(t, e.url, app.ID, other)
	e.ok("t", `mutation($id: ID!) { unregisterRuntime(id: $id) { id } }`, map[string]any{"id": other})
	assert.Equal(t, []string{rt}, e.st.Snapshot().Applications[0].Runtimes)

	sandboxtest.UnassignApplication(t, e.url, app.ID, rt)
	assert.Empty(t, e.credentialsOf("t", rt))
	code, _ = sandboxtest.Do(t, sandboxtest.APIRequest(t, http.MethodDelete, e.url+"/_sandbox/director/applications/"+app.ID, "", ""))
	assert.Equal(t, http.StatusNoContent, code)
	assert.Empty(t, e.st.Snapshot().Applications)
}

func TestApplicationsSurviveARestart(t *testing.T) {
	store := durable.NewMemoryStore()
	clock := sandboxtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opener := func(ctx context.Context, s durable.Store) (*directorstandin.StandIn, error) {
		o := options(clock)
		o.Store = s
		return directorstandin.Open(ctx, o)
	}
	e := serve(t, clock, sandboxtest.Open(t, opener, store))
	rt := e.register("t", "rt", nil)
	app := sandboxtest.RegisterApplication(t, e.url, directorstandin.ApplicationInput{Tenant: "t", Name: "shop", Labels: map[string]any{"n": 1},
		Bundles: []directorstandin.Bundle{{Name: "orders"}}})
	sandboxtest.AssignApplication(t, e.url, app.ID, rt)
	creds := e.credentialsOf("t", rt)

	restarted := sandboxtest.Reopen(t, opener, store, e.st.Objects())
	e2 := serve(t, clock, restarted)
	assert.Equal(t, creds, e2.credentialsOf("t", rt))
	sandboxtest.RequireResetIsDurable(t, restarted, opener, store)
}

func TestOneTimeTokensAreRedeemedOnce(t *testing.T) {
	e := newEnv(t)
	rt := e.register("t", "rt", nil)
	d := e.ok("t", `mutation($id: ID!) { r: requestOneTimeTokenForRuntime(id: $id) { token } }`, map[string]any{"id": rt})
	token := d["r"].(map[string]any)["token"].(string)
	ctx := context.Background()

	refused := assert.AnError
	err := e.st.RedeemOneTimeToken(ctx, token, true, func(owner directorstandin.TokenOwner, next string) error {
		assert.Equal(t, directorstandin.TokenOwner{Tenant: "t", RuntimeID: rt}, owner)
		assert.NotEmpty(t, next)
		return refused
	})
	require.ErrorIs(t, err, refused)
	assert.Equal(t, 1, e.st.Snapshot().Tenants["t"][0].ValidTokens, "a failed use keeps the token and issues none")

	var next string
	require.NoError(t, e.st.RedeemOneTimeToken(ctx, token, true, func(_ directorstandin.TokenOwner, n string) error { next = n; return nil }))
	snap := e.st.Snapshot().Tenants["t"][0]
	assert.Equal(t, 1, snap.ValidTokens, "the used one is gone, the new one valid")
	assert.NotNil(t, snap.Auths[0].UsedAt)
	require.ErrorIs(t, e.st.RedeemOneTimeToken(ctx, token, false, func(directorstandin.TokenOwner, string) error { return nil }), directorstandin.ErrInvalidToken)

	clock := e.clock
	clock.Advance(directorstandin.OneTimeTokenTTL)
	require.ErrorIs(t, e.st.RedeemOneTimeToken(ctx, next, false, func(directorstandin.TokenOwner, string) error { return nil }), directorstandin.ErrInvalidToken)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
