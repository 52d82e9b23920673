package connectorstandin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/directorstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
)

// The Director serves the Runtime Agent over mutual TLS: this test needs the Connector's
// certificates, so it lives here.

const appsQuery = `query($id: ID!, $after: PageCursor) { result: applicationsForRuntime(runtimeID: $id, first: 2, after: $after) {
	data { id name description providerName labels packages: bundles { data { id name description defaultInstanceAuth { credential {
		... on BasicCredentialData { username password } ... on OAuthCredentialData { clientId clientSecret url } } } } } }
	pageInfo { hasNextPage endCursor } totalCount } }`

type appPage struct {
	Result struct {
		Data []struct {
			ID           string         `json:"id"`
			Name         string         `json:"name"`
			Description  *string        `json:"description"`
			ProviderName *string        `json:"providerName"`
			Labels       map[string]any `json:"labels"`
			Packages     struct {
				Data []struct {
					ID                  string `json:"id"`
					Name                string `json:"name"`
					DefaultInstanceAuth struct {
						Credential map[string]string `json:"credential"`
					} `json:"defaultInstanceAuth"`
				} `json:"data"`
			} `json:"packages"`
		} `json:"data"`
		PageInfo struct {
			HasNextPage bool   `json:"hasNextPage"`
			EndCursor   string `json:"endCursor"`
		} `json:"pageInfo"`
		TotalCount int `json:"totalCount"`
	} `json:"result"`
}

func (e *env) directorAs(c connected, tenantHeader, query string, vars map[string]any) gqlResult {
	e.t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(e.t, err)
	req := sandboxtest.APIRequest(e.t, http.MethodPost, c.config.Result.Info.DirectorURL, "", string(body))
	req.Header.Set("Tenant", tenantHeader)
	resp, err := e.client(&c.cert).Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	r := gqlResult{code: resp.StatusCode}
	require.NoError(e.t, json.NewDecoder(resp.Body).Decode(&r))
	return r
}

func TestTheDirectorServesARuntimeItsApplicationsOverMutualTLS(t *testing.T) {
	e := newEnv(t, nil)
	rt, other := e.connect("rt"), e.connect("other")
	bundles := []directorstandin.Bundle{{Name: "api", Description: "the API"}, {Name: "events", Auth: directorstandin.AuthOAuth, OAuthURL: "https://auth.example/token"}}
	var mine []directorstandin.Application
	for i := range 3 {
		app := sandboxtest.RegisterApplication(t, e.sb.URL, directorstandin.ApplicationInput{Tenant: tenant, Name: fmt.Sprintf("app-%d", i),
			ProviderName: "SAP", Labels: map[string]any{"n": i}, Bundles: bundles})
		sandboxtest.AssignApplication(t, e.sb.URL, app.ID, rt.runtimeID)
		mine = append(mine, app)
	}
	shared := mine[0]
	sandboxtest.AssignApplication(t, e.sb.URL, shared.ID, other.runtimeID)
	sandboxtest.RegisterApplication(t, e.sb.URL, directorstandin.ApplicationInput{Tenant: tenant, Name: "idle"})
	otherTenant := sandboxtest.RegisterApplication(t, e.sb.URL, directorstandin.ApplicationInput{Tenant: "tenant-b", Name: "app-0"})
	code, _ := sandboxtest.Do(t, sandboxtest.APIRequest(t, http.MethodPut,
		e.sb.URL+"/_sandbox/director/applications/"+otherTenant.ID+"/runtimes/"+rt.runtimeID, "", ""))
	assert.Equal(t, http.StatusNotFound, code, "a runtime of another tenant")

	// two pages of two
	first := decode[appPage](t, e.directorAs(rt, tenant, appsQuery, map[string]any{"id": rt.runtimeID}))
	assert.Equal(t, 3, first.Result.TotalCount)
	require.Len(t, first.Result.Data, 2)
	assert.True(t, first.Result.PageInfo.HasNextPage)
	second := decode[appPage](t, e.directorAs(rt, tenant, appsQuery, map[string]any{"id": rt.runtimeID, "after": first.Result.PageInfo.EndCursor}))
	require.Len(t, second.Result.Data, 1)
	assert.False(t, second.Result.PageInfo.HasNextPage)
	apps := append(first.Result.Data, second.Result.Data...)
	for i, a := range apps {
		assert.Equal(t, mine[i].ID, a.ID)
		assert.Equal(t, "SAP", *a.ProviderName)
		assert.Nil(t, a.Description)
		assert.Equal(t, map[string]any{"n": float64(i)}, a.Labels)
		require.Len(t, a.Packages.Data, 2)
		assert.NotEmpty(t, a.Packages.Data[0].DefaultInstanceAuth.Credential["password"])
		assert.Equal(t, "https://auth.example/token", a.Packages.Data[1].DefaultInstanceAuth.Credential["url"])
	}
	// the shared application's credentials are the other runtime's own
	theirs := decode[appPage](t, e.directorAs(other, tenant, appsQuery, map[string]any{"id": other.runtimeID}))
	require.Len(t, theirs.Result.Data, 1)
	assert.NotEqual(t, apps[0].Packages.Data[0].DefaultInstanceAuth.Credential, theirs.Result.Data[0].Packages.Data[0].DefaultInstanceAuth.Credential)

	// only itself, in its tenant, and only the agent's operations
	r := e.directorAs(rt, tenant, appsQuery, map[string]any{"id": other.runtimeID})
	assert.Equal(t, "Unauthorized", r.kind())
	r = e.directorAs(rt, "tenant-b", appsQuery, map[string]any{"id": rt.runtimeID})
	assert.Equal(t, "NotFound", r.kind())
	r = e.directorAs(rt, tenant, `query { runtimes { totalCount } }`, nil)
	assert.Equal(t, "Unauthorized", r.kind())

	label := `mutation($id: ID!) { result: setRuntimeLabel(runtimeID: $id, key: "runtime_consoleUrl", value: "https://console.example") { key value } }`
	decode[map[string]any](t, e.directorAs(rt, tenant, label, map[string]any{"id": rt.runtimeID}))
	assert.Equal(t, "Unauthorized", e.directorAs(rt, tenant, label, map[string]any{"id": other.runtimeID}).kind())
	labels := e.sb.Director.Snapshot().Tenants[tenant][0].Labels
	assert.Equal(t, "https://console.example", labels["runtime_consoleUrl"])

	// unassigning removes it from the runtime's list
	sandboxtest.UnassignApplication(t, e.sb.URL, mine[1].ID, rt.runtimeID)
	after := decode[appPage](t, e.directorAs(rt, tenant, appsQuery, map[string]any{"id": rt.runtimeID}))
	assert.Equal(t, 2, after.Result.TotalCount)
	assert.Equal(t, []string{mine[0].ID, mine[2].ID}, []string{after.Result.Data[0].ID, after.Result.Data[1].ID})
}
