package azurestandin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/azurestandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	sub    = "11111111-2222-3333-4444-555555555555"
	rgPath = "/azure/subscriptions/" + sub + "/resourcegroups/"
	rgAPI  = "?api-version=" + azurestandin.ResourceGroupsAPIVersion
	ehAPI  = "?api-version=" + azurestandin.EventHubAPIVersion
)

type env struct {
	t     *testing.T
	st    *azurestandin.Server
	url   string
	clock *sandboxtest.Clock
	token string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clock := sandboxtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return serve(t, clock, azurestandin.New(options(clock)))
}

func options(clock *sandboxtest.Clock) azurestandin.Options {
	return azurestandin.Options{ClientID: "id", ClientSecret: "secret", SubscriptionID: sub, TokenTTL: time.Hour,
		ActivationTime: time.Minute, DeletionTime: 5 * time.Minute, LongRunning: azurestandin.LongRunningNone, Now: clock.Now}
}

// serve serves the stand-in and takes a token.
func serve(t *testing.T, clock *sandboxtest.Clock, st *azurestandin.Server) *env {
	t.Helper()
	e := &env{t: t, clock: clock, st: st}
	_, e.url = sandboxtest.Serve(t, sandbox.Options{}, e.st)
	tok := sandboxtest.Token(t, e.url+"/azure/tenant-1/oauth2/v2.0/token", url.Values{"grant_type": {"client_credentials"},
		"client_id": {"id"}, "client_secret": {"secret"}, "scope": {"https://management.azure.com/.default"}})
	assert.Equal(t, 3600, tok.ExpiresIn)
	e.token = tok.AccessToken
	return e
}

func (e *env) tokenRequest(path string, form url.Values) (int, string) {
	return sandboxtest.PostForm(e.t, e.url+path, form)
}

// arm sends an authorised ARM request to a path relative to /azure.
func (e *env) arm(method, path, body string) (int, string) {
	e.t.Helper()
	return sandboxtest.Do(e.t, sandboxtest.APIRequest(e.t, method, e.url+path, e.token, body))
}

func nsPath(group, ns string) string {
	return "/azure/subscriptions/" + sub + "/resourceGroups/" + group + "/providers/Microsoft.EventHub/namespaces/" + ns
}

const nsBody = `{"location":"westeurope","sku":{"name":"Standard","tier":"Standard","capacity":1},"properties":{"kafkaEnabled":true},"tags":{"runtime":"r1"}}`

func armCode(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	assert.NotEmpty(t, e.Error.Message)
	return e.Error.Code
}

func TestTokenEndpoint(t *testing.T) {
	e := newEnv(t)
	form := func(scope string) url.Values {
		v := url.Values{"grant_type": {"client_credentials"}, "client_id": {"id"}, "client_secret": {"secret"}}
		if scope != "" {
			v.Set("scope", scope)
		}
		return v
	}
	code, body := e.tokenRequest("/azure/oauth2/v2.0/token", form("http://sandbox/azure/.default"))
	assert.Equal(t, http.StatusOK, code, body)
	code, body = e.tokenRequest("/azure/oauth2/v2.0/token", form(""))
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "invalid_request")
	assert.Contains(t, body, "'scope'")
	code, body = e.tokenRequest("/azure/oauth2/v2.0/token", form("https://management.azure.com/user_impersonation"))
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "invalid_scope")
	wrong := form("https://management.azure.com/.default")
	wrong.Set("client_secret", "nope")
	code, body = e.tokenRequest("/azure/oauth2/v2.0/token", wrong)
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, body, "invalid_client")
	assert.Equal(t, 3, e.st.Snapshot().Calls["token.rejected"])
}

func TestARMChecksTokenAPIVersionAndSubscription(t *testing.T) {
	e := newEnv(t)
	for auth, code := range map[string]string{"": "AuthenticationFailed", "Bearer nope": "InvalidAuthenticationToken"} {
		req := sandboxtest.Request(t, http.MethodGet, e.url+rgPath+"rg"+rgAPI, "")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		status, body := sandboxtest.Do(t, req)
		assert.Equal(t, http.StatusUnauthorized, status)
		assert.Equal(t, code, armCode(t, body))
	}

	status, body := e.arm(http.MethodGet, rgPath+"rg", "")
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, "MissingApiVersionParameter", armCode(t, body))
	status, body = e.arm(http.MethodGet, rgPath+"rg"+ehAPI, "")
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, "InvalidApiVersionParameter", armCode(t, body))
	status, body = e.arm(http.MethodGet, nsPath("rg", "namespace-1")+rgAPI, "")
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, "InvalidApiVersionParameter", armCode(t, body))

	status, body = e.arm(http.MethodGet, "/azure/subscriptions/other/resourcegroups/rg"+rgAPI, "")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "SubscriptionNotFound", armCode(t, body))
	status, body = e.arm(http.MethodGet, "/azure/subscriptions/"+sub+"/resourcegroups/rg/providers/Microsoft.Storage/accounts/x"+rgAPI, "")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "InvalidResourceType", armCode(t, body))
	assert.Equal(t, 2, e.st.Snapshot().Calls["unauthorized"])
}

func TestResourceGroupValidation(t *testing.T) {
	e := newEnv(t)
	for name, c := range map[string]struct{ group, body, code string }{
		"bad JSON":     {"rg", `{"location":`, "InvalidRequestContent"},
		"no location":  {"rg", `{"tags":{}}`, "LocationRequired"},
		"bad name":     {"rg!x", `{"location":"westeurope"}`, "InvalidResourceGroup"},
		"trailing dot": {"rg.", `{"location":"westeurope"}`, "InvalidResourceGroup"},
		"bad tag name": {"rg", `{"location":"westeurope","tags":{"a/b":"x"}}`, "InvalidTag"},
		"long tag":     {"rg", `{"location":"westeurope","tags":{"a":"` + strings.Repeat("x", 257) + `"}}`, "InvalidTag"},
	} {
		status, body := e.arm(http.MethodPut, rgPath+c.group+rgAPI, c.body)
		assert.Equal(t, http.StatusBadRequest, status, name)
		assert.Equal(t, c.code, armCode(t, body), name)
	}
	snap := e.st.Snapshot()
	assert.Empty(t, snap.ResourceGroups)
	assert.Empty(t, snap.GroupCreatesByName)
	assert.Equal(t, 4, snap.GroupPutsByName["rg"])
}

func TestNamespaceValidation(t *testing.T) {
	e := newEnv(t)
	status, body := e.arm(http.MethodPut, nsPath("rg", "namespace-1")+ehAPI, nsBody)
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "ResourceGroupNotFound", armCode(t, body))
	status, _ = e.arm(http.MethodPut, rgPath+"rg"+rgAPI, `{"location":"westeurope"}`)
	require.Equal(t, http.StatusCreated, status)

	for name, c := range map[string]struct{ ns, body, field string }{
		"bad JSON":      {"namespace-1", `{`, "deserialized"},
		"short name":    {"ns", nsBody, "name 'ns'"},
		"no location":   {"namespace-1", `{"sku":{"name":"Standard"}}`, "location"},
		"no sku":        {"namespace-1", `{"location":"westeurope"}`, "sku.name"},
		"unknown sku":   {"namespace-1", `{"location":"westeurope","sku":{"name":"Gold"}}`, "sku.name"},
		"tier mismatch": {"namespace-1", `{"location":"westeurope","sku":{"name":"Standard","tier":"Premium"}}`, "sku.tier"},
		"capacity":      {"namespace-1", `{"location":"westeurope","sku":{"name":"Standard","capacity":41}}`, "sku.capacity"},
		"basic kafka":   {"namespace-1", `{"location":"westeurope","sku":{"name":"Basic"},"properties":{"kafkaEnabled":true}}`, "properties.kafkaEnabled"},
		"bad tag":       {"namespace-1", `{"location":"westeurope","sku":{"name":"Standard"},"tags":{"":"x"}}`, "tags"},
	} {
		status, body := e.arm(http.MethodPut, nsPath("rg", c.ns)+ehAPI, c.body)
		assert.Equal(t, http.StatusBadRequest, status, name)
		assert.Contains(t, body, c.field, name)
	}
	snap := e.st.Snapshot()
	require.Len(t, snap.ResourceGroups, 1)
	assert.Empty(t, snap.ResourceGroups[0].Namespaces)
	assert.Empty(t, snap.NamespaceCreatesByName)

	// defaults: capacity 1, tier from the name, Kafka on for Standard
	status, body = e.arm(http.MethodPut, nsPath("rg", "namespace-2")+ehAPI, `{"location":"westeurope","sku":{"name":"standard"}}`)
	require.Equal(t, http.StatusCreated, status, body)
	assert.Contains(t, body, `"sku":{"name":"Standard","tier":"Standard","capacity":1}`)
	assert.Contains(t, body, `"kafkaEnabled":true`)

	// namespace names are global
	status, _ = e.arm(http.MethodPut, rgPath+"other"+rgAPI, `{"location":"westeurope"}`)
	require.Equal(t, http.StatusCreated, status)
	status, body = e.arm(http.MethodPut, nsPath("other", "NAMESPACE-2")+ehAPI, nsBody)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, body, "The specified name is not available")
}

func TestLifecycle(t *testing.T) {
	e := newEnv(t)
	status, body := e.arm(http.MethodGet, rgPath+"rg-1"+rgAPI, "")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "ResourceGroupNotFound", armCode(t, body))

	status, body = e.arm(http.MethodPut, rgPath+"rg-1"+rgAPI, `{"location":"West Europe","tags":{"a":"1"}}`)
	require.Equal(t, http.StatusCreated, status, body)
	assert.JSONEq(t, `{"id":"/subscriptions/`+sub+`/resourceGroups/rg-1","name":"rg-1","type":"Microsoft.Resources/resourceGroups",
		"location":"westeurope","tags":{"a":"1"},"properties":{"provisioningState":"Succeeded"}}`, body)
	status, body = e.arm(http.MethodPut, "/azure/subscriptions/"+sub+"/resourceGroups/RG-1"+rgAPI, `{"location":"westeurope","tags":{"b":"2"}}`)
	require.Equal(t, http.StatusOK, status, "names and fixed segments are case-insensitive: %s", body)
	status, body = e.arm(http.MethodPut, rgPath+"rg-1"+rgAPI, `{"location":"northeurope"}`)
	assert.Equal(t, http.StatusConflict, status)
	assert.Equal(t, "InvalidResourceGroupLocation", armCode(t, body))

	// a namespace activates after ActivationTime; its keys are listed only then
	status, body = e.arm(http.MethodPut, nsPath("rg-1", "kyma-ns-1")+ehAPI, nsBody)
	require.Equal(t, http.StatusCreated, status, body)
	var ns struct {
		ID         string
		Name       string
		Location   string
		Sku        azurestandin.Sku
		Properties struct {
			ProvisioningState  string
			KafkaEnabled       bool
			ServiceBusEndpoint string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(body), &ns))
	assert.Equal(t, "/subscriptions/"+sub+"/resourceGroups/rg-1/providers/Microsoft.EventHub/namespaces/kyma-ns-1", ns.ID)
	assert.Equal(t, azurestandin.StateActivating, ns.Properties.ProvisioningState)
	assert.True(t, ns.Properties.KafkaEnabled)
	assert.Equal(t, "https://kyma-ns-1.servicebus.windows.net:443/", ns.Properties.ServiceBusEndpoint)
	status, body = e.arm(http.MethodPost, nsPath("rg-1", "kyma-ns-1")+"/authorizationRules/RootManageSharedAccessKey/listKeys"+ehAPI, "")
	assert.Equal(t, http.StatusConflict, status, body)

	e.clock.Advance(time.Minute)
	status, body = e.arm(http.MethodGet, nsPath("rg-1", "kyma-ns-1")+ehAPI, "")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `"provisioningState":"Succeeded"`)
	status, body = e.arm(http.MethodPut, nsPath("rg-1", "kyma-ns-1")+ehAPI, nsBody)
	require.Equal(t, http.StatusOK, status, "a second PUT updates: %s", body)
	var keys map[string]string
	for range 2 {
		status, body = e.arm(http.MethodPost, nsPath("rg-1", "kyma-ns-1")+"/authorizationRules/RootManageSharedAccessKey/listKeys"+ehAPI, "")
		require.Equal(t, http.StatusOK, status, body)
		var again map[string]string
		require.NoError(t, json.Unmarshal([]byte(body), &again))
		if keys != nil {
			assert.Equal(t, keys, again, "keys are stable")
		}
		keys = again
	}
	assert.Equal(t, "Endpoint=sb://kyma-ns-1.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey="+keys["primaryKey"], keys["primaryConnectionString"])
	assert.Equal(t, "RootManageSharedAccessKey", keys["keyName"])
	status, body = e.arm(http.MethodPost, nsPath("rg-1", "kyma-ns-1")+"/authorizationRules/Other/listKeys"+ehAPI, "")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "NotFound", armCode(t, body))
	status, body = e.arm(http.MethodGet, nsPath("rg-1", "missing-ns")+ehAPI, "")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "ResourceNotFound", armCode(t, body))

	// deletion: Deleting for DeletionTime, then gone with the namespace
	status, _ = e.arm(http.MethodDelete, rgPath+"rg-1"+rgAPI, "")
	assert.Equal(t, http.StatusAccepted, status)
	status, _ = e.arm(http.MethodDelete, rgPath+"rg-1"+rgAPI, "")
	assert.Equal(t, http.StatusAccepted, status, "deleting again")
	status, body = e.arm(http.MethodGet, rgPath+"rg-1"+rgAPI, "")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `"provisioningState":"Deleting"`)
	status, body = e.arm(http.MethodGet, nsPath("rg-1", "kyma-ns-1")+ehAPI, "")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `"provisioningState":"Deleting"`)
	for _, path := range []string{rgPath + "rg-1" + rgAPI, nsPath("rg-1", "kyma-ns-1") + ehAPI} {
		body := `{"location":"westeurope"}`
		if strings.Contains(path, "namespaces") {
			body = nsBody
		}
		status, resp := e.arm(http.MethodPut, path, body)
		assert.Equal(t, http.StatusConflict, status, path)
		assert.Equal(t, "ResourceGroupBeingDeleted", armCode(t, resp), path)
	}

	snap := e.st.Snapshot()
	require.Len(t, snap.ResourceGroups, 1)
	g := snap.ResourceGroups[0]
	assert.Equal(t, "Deleting", g.ProvisioningState)
	assert.Equal(t, map[string]string{"b": "2"}, g.Tags)
	assert.Equal(t, map[string]int{"put": 4, "get": 1, "delete": 2}, g.Calls, "the GET before the creation is not the group's")
	require.Len(t, g.Namespaces, 1)
	assert.Equal(t, "kyma-ns-1", g.Namespaces[0].Name)
	assert.Equal(t, map[string]int{"put": 3, "get": 2, "listKeys": 4}, g.Namespaces[0].Calls)
	assert.Equal(t, map[string]int{"rg-1": 1}, snap.GroupCreatesByName)
	assert.Equal(t, map[string]int{"rg-1": 4}, snap.GroupPutsByName)
	assert.Equal(t, map[string]int{"rg-1": 1}, snap.GroupDeletesByName)
	assert.Equal(t, map[string]int{"kyma-ns-1": 1}, snap.NamespaceCreatesByName)
	assert.Equal(t, map[string]int{"kyma-ns-1": 3}, snap.NamespacePutsByName)

	e.clock.Advance(5 * time.Minute)
	status, body = e.arm(http.MethodGet, rgPath+"rg-1"+rgAPI, "")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "ResourceGroupNotFound", armCode(t, body))
	status, body = e.arm(http.MethodGet, nsPath("rg-1", "kyma-ns-1")+ehAPI, "")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "ResourceGroupNotFound", armCode(t, body))
	status, _ = e.arm(http.MethodDelete, rgPath+"rg-1"+rgAPI, "")
	assert.Equal(t, http.StatusNotFound, status)

	// the name is free again
	status, _ = e.arm(http.MethodPut, rgPath+"rg-1"+rgAPI, `{"location":"northeurope"}`)
	assert.Equal(t, http.StatusCreated, status)
	assert.Equal(t, 2, e.st.Snapshot().GroupCreatesByName["rg-1"])

	require.NoError(t, e.st.Reset(context.Background()))
	snap = e.st.Snapshot()
	assert.Empty(t, snap.ResourceGroups)
	assert.Empty(t, snap.GroupCreatesByName)
	status, _ = e.arm(http.MethodGet, rgPath+"rg-1"+rgAPI, "")
	assert.Equal(t, http.StatusNotFound, status, "tokens survive a reset")
}

func TestZeroDelays(t *testing.T) {
	st := azurestandin.New(azurestandin.Options{ClientID: "id", ClientSecret: "secret", LongRunning: azurestandin.LongRunningNone})
	e := &env{t: t, st: st}
	_, e.url = sandboxtest.Serve(t, sandbox.Options{}, st)
	e.token = sandboxtest.Token(t, e.url+"/azure/oauth2/v2.0/token", url.Values{"grant_type": {"client_credentials"},
		"client_id": {"id"}, "client_secret": {"secret"}, "scope": {"x/.default"}}).AccessToken

	base := "/azure/subscriptions/" + azurestandin.DefaultSubscriptionID
	status, _ := e.arm(http.MethodPut, base+"/resourcegroups/rg"+rgAPI, `{"location":"westeurope"}`)
	require.Equal(t, http.StatusCreated, status)
	status, body := e.arm(http.MethodPut, base+"/resourceGroups/rg/providers/Microsoft.EventHub/namespaces/namespace-0"+ehAPI, nsBody)
	require.Equal(t, http.StatusCreated, status)
	assert.Contains(t, body, `"provisioningState":"Succeeded"`, "active at once")
	status, _ = e.arm(http.MethodDelete, base+"/resourcegroups/rg"+rgAPI, "")
	require.Equal(t, http.StatusAccepted, status)
	status, _ = e.arm(http.MethodGet, base+"/resourcegroups/rg"+rgAPI, "")
	assert.Equal(t, http.StatusNotFound, status, "gone at once")
	assert.Equal(t, azurestandin.DefaultSubscriptionID, st.Snapshot().SubscriptionID)
}

func TestStateSurvivesARestart(t *testing.T) {
	store := durable.NewMemoryStore()
	clock := sandboxtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func(ctx context.Context, store durable.Store) (*azurestandin.Server, error) {
		o := options(clock)
		o.Store = store
		return azurestandin.Open(ctx, o)
	}
	e := serve(t, clock, sandboxtest.Open(t, open, store))
	for _, rg := range []string{"rg-1", "rg-2"} {
		status, body := e.arm(http.MethodPut, rgPath+rg+rgAPI, `{"location":"westeurope","tags":{"a":"b"}}`)
		require.Equal(t, http.StatusCreated, status, body)
	}
	status, body := e.arm(http.MethodPut, nsPath("rg-1", "kyma-ns-1")+ehAPI, nsBody)
	require.Equal(t, http.StatusCreated, status, body)
	status, _ = e.arm(http.MethodDelete, rgPath+"rg-2"+rgAPI, "")
	require.Equal(t, http.StatusAccepted, status)
	clock.Advance(2 * time.Minute)
	keysPath := nsPath("rg-1", "kyma-ns-1") + "/authorizationRules/" + azurestandin.RootRule + "/listKeys" + ehAPI
	status, keys := e.arm(http.MethodPost, keysPath, "")
	require.Equal(t, http.StatusOK, status, keys)

	restarted := sandboxtest.Reopen(t, open, store, e.st.Snapshot())
	e2 := serve(t, clock, restarted)
	status, again := e2.arm(http.MethodPost, keysPath, "")
	require.Equal(t, http.StatusOK, status, again)
	assert.JSONEq(t, keys, again, "the same keys")
	status, body = e2.arm(http.MethodGet, rgPath+"rg-2"+rgAPI, "")
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, `"provisioningState":"Deleting"`, "the deletion goes on")
	clock.Advance(5 * time.Minute)
	status, _ = e2.arm(http.MethodGet, rgPath+"rg-2"+rgAPI, "")
	assert.Equal(t, http.StatusNotFound, status)
	snap := e2.st.Snapshot()
	assert.Equal(t, map[string]int{"rg-1": 1, "rg-2": 1}, snap.GroupCreatesByName)
	assert.Equal(t, map[string]int{"kyma-ns-1": 1}, snap.NamespaceCreatesByName)
	assert.Equal(t, map[string]int{"rg-2": 1}, snap.GroupDeletesByName)
	require.Len(t, snap.ResourceGroups, 1)
	assert.Equal(t, 2, snap.ResourceGroups[0].Namespaces[0].Calls["listKeys"])

	restarted = sandboxtest.Reopen(t, open, store, snap)
	sandboxtest.RequireResetIsDurable(t, restarted, open, store)
}
