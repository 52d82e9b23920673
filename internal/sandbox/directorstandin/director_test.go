package directorstandin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/directorstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const connector = "https://connector.sandbox.example/graphql"

type env struct {
	t     *testing.T
	st    *directorstandin.StandIn
	url   string
	clock *sandboxtest.Clock
	token string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clock := sandboxtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return serve(t, clock, directorstandin.New(options(clock)))
}

func options(clock *sandboxtest.Clock) directorstandin.Options {
	return directorstandin.Options{ClientID: "id", ClientSecret: "secret", TokenTTL: time.Hour, ConnectorURL: connector, Now: clock.Now}
}

// serve serves the stand-in and takes an OAuth token.
func serve(t *testing.T, clock *sandboxtest.Clock, st *directorstandin.StandIn) *env {
	t.Helper()
	e := &env{t: t, clock: clock, st: st}
	_, e.url = sandboxtest.Serve(t, sandbox.Options{}, e.st)
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {"id"}, "client_secret": {"secret"}}
	e.token = sandboxtest.Token(t, e.url+"/director/oauth/token", form).AccessToken
	return e
}

type gqlError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

type result struct {
	code   int
	Data   map[string]any `json:"data"`
	Errors []gqlError     `json:"errors"`
}

// kind is extensions.error of the only error, or extensions.code of a protocol error.
func (r result) kind(t *testing.T) string {
	t.Helper()
	require.Len(t, r.Errors, 1, "%+v", r)
	if k, ok := r.Errors[0].Extensions["error"].(string); ok {
		return k
	}
	k, _ := r.Errors[0].Extensions["code"].(string)
	return k
}

func (e *env) post(header http.Header, body string) result {
	e.t.Helper()
	req := sandboxtest.Request(e.t, http.MethodPost, e.url+"/director/graphql", body)
	req.Header = header
	code, b := sandboxtest.Do(e.t, req)
	r := result{code: code}
	if code != http.StatusUnauthorized {
		require.NoError(e.t, json.Unmarshal([]byte(b), &r), b)
	}
	return r
}

func (e *env) gql(tenant, query string, vars map[string]any) result {
	e.t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(e.t, err)
	h := http.Header{"Authorization": {"Bearer " + e.token}, "Content-Type": {"application/json"}}
	if tenant != "" {
		h.Set("Tenant", tenant)
	}
	return e.post(h, string(body))
}

// ok runs a request that must succeed and returns its data.
func (e *env) ok(tenant, query string, vars map[string]any) map[string]any {
	e.t.Helper()
	r := e.gql(tenant, query, vars)
	require.Equal(e.t, http.StatusOK, r.code)
	require.Empty(e.t, r.Errors)
	return r.Data
}

func (e *env) register(tenant, name string, labels map[string]any) string {
	e.t.Helper()
	d := e.ok(tenant, `mutation($in: RuntimeRegisterInput!) { r: registerRuntime(in: $in) { id } }`,
		map[string]any{"in": map[string]any{"name": name, "labels": labels}})
	return d["r"].(map[string]any)["id"].(string)
}

func TestAuthenticationAndProtocolErrors(t *testing.T) {
	e := newEnv(t)
	q := `{"query":"{ runtimes { totalCount } }"}`

	assert.Equal(t, http.StatusUnauthorized, e.post(http.Header{"Content-Type": {"application/json"}, "Tenant": {"t"}}, q).code)
	assert.Equal(t, http.StatusUnauthorized, e.post(http.Header{"Authorization": {"Bearer nope"}, "Tenant": {"t"}}, q).code)

	auth := func(h http.Header) http.Header {
		h.Set("Authorization", "Bearer "+e.token)
		return h
	}
	r := e.post(auth(http.Header{"Tenant": {"t"}, "Content-Type": {"text/plain"}}), q)
	assert.Equal(t, http.StatusBadRequest, r.code, "not application/json")
	r = e.post(auth(http.Header{"Tenant": {"t"}, "Content-Type": {"application/json"}}), `{"query":`)
	assert.Equal(t, http.StatusBadRequest, r.code)
	assert.Contains(t, r.Errors[0].Message, "json request body could not be decoded")

	r = e.post(auth(http.Header{"Content-Type": {"application/json"}}), q)
	assert.Equal(t, http.StatusOK, r.code, "Compass answers a missing tenant with 200 and an error")
	assert.Equal(t, "TenantRequired", r.kind(t))
	assert.Nil(t, r.Data)

	r = e.gql("t", `{ runtimes { totalCount }`, nil)
	assert.Equal(t, http.StatusUnprocessableEntity, r.code)
	assert.Equal(t, "GRAPHQL_PARSE_FAILED", r.kind(t))

	r = e.gql("t", `{ runtimes { nope } }`, nil)
	assert.Equal(t, http.StatusUnprocessableEntity, r.code)
	assert.Equal(t, "GRAPHQL_VALIDATION_FAILED", r.kind(t))
	assert.Contains(t, r.Errors[0].Message, `Cannot query field "nope"`)

	r = e.gql("t", `mutation($in: RuntimeRegisterInput!) { registerRuntime(in: $in) { id } }`, nil)
	assert.Equal(t, http.StatusUnprocessableEntity, r.code, "a required variable is missing")
	assert.Contains(t, r.Errors[0].Message, "must be defined")

	r = e.gql("t", `mutation($in: RuntimeRegisterInput!) { registerRuntime(in: $in) { id } }`,
		map[string]any{"in": map[string]any{"name": "x", "statusCondition": "RUNNING"}})
	assert.Equal(t, http.StatusUnprocessableEntity, r.code)
	assert.Contains(t, r.Errors[0].Message, "RUNNING is not a valid RuntimeStatusCondition")

	r = e.gql("t", ``, nil)
	assert.Equal(t, http.StatusUnprocessableEntity, r.code)

	e.clock.Advance(2 * time.Hour)
	assert.Equal(t, http.StatusUnauthorized, e.gql("t", `{ runtimes { totalCount } }`, nil).code, "expired token")
	assert.Equal(t, 8, e.st.Snapshot().Calls["invalid"])
}

func TestInputValidation(t *testing.T) {
	e := newEnv(t)
	const register = `mutation($in: RuntimeRegisterInput!) { r: registerRuntime(in: $in) { id } }`
	for _, tc := range []struct {
		in    map[string]any
		field string
	}{
		{map[string]any{"name": " "}, "[name=cannot be blank]"},
		{map[string]any{"name": strings.Repeat("n", 257)}, "[name=the length must be between 1 and 256]"},
		{map[string]any{"name": "c 1"}, "[name=must be in a valid format]"},
		{map[string]any{"name": "a", "description": strings.Repeat("d", 2001)}, "[description="},
		{map[string]any{"name": "a", "labels": "not-an-object"}, "[labels=must be a JSON object]"},
		{map[string]any{"name": "a", "labels": map[string]any{"bad key": "v"}}, `[labels=bad key: must be in a valid format]`},
		{map[string]any{"name": "a", "labels": map[string]any{"kyma-project.io/runtime-id": "v"}}, `[labels=kyma-project.io/runtime-id: must be in a valid format]`},
	} {
		r := e.gql("t", register, map[string]any{"in": tc.in})
		assert.Equal(t, http.StatusOK, r.code)
		assert.Equal(t, "InvalidData", r.kind(t), tc.field)
		assert.Contains(t, r.Errors[0].Message, "Invalid data RuntimeRegisterInput "+tc.field)
		assert.Equal(t, []any{"r"}, r.Errors[0].Path)
		assert.Nil(t, r.Data, "registerRuntime is non-null, so data is null")
	}
	id := e.register("t", "rt", nil)

	r := e.gql("t", `mutation { setRuntimeLabel(runtimeID: "`+id+`", key: "", value: "x") { key } }`, nil)
	assert.Equal(t, "InvalidData", r.kind(t))
	r = e.gql("t", `mutation { setRuntimeLabel(runtimeID: "`+id+`", key: "kyma-project.io/x", value: "x") { key } }`, nil)
	assert.Equal(t, "InvalidData", r.kind(t))
	assert.Equal(t, "Invalid data LabelInput [key=must be in a valid format]", r.Errors[0].Message)

	// The Director manages scenarios: setting them is refused, with an error that is not one of
	// its kinds (so an InternalError with the reason).
	const refused = "label with key scenarios cannot be set explicitly"
	r = e.gql("t", register, map[string]any{"in": map[string]any{"name": "a", "labels": map[string]any{"scenarios": []any{"DEFAULT"}}}})
	assert.Equal(t, "InternalError", r.kind(t))
	assert.Regexp(t, `^Internal Server Error \[errorID=[0-9a-f-]{36}, reason: `+refused+`\]$`, r.Errors[0].Message)
	r = e.gql("t", `mutation($in: RuntimeUpdateInput!) { updateRuntime(id: "`+id+`", in: $in) { id } }`,
		map[string]any{"in": map[string]any{"name": "rt", "labels": map[string]any{"scenarios": []any{"DEFAULT"}}}})
	assert.Equal(t, "InternalError", r.kind(t))
	assert.Contains(t, r.Errors[0].Message, refused)
	r = e.gql("t", `mutation { setRuntimeLabel(runtimeID: "`+id+`", key: "scenarios", value: ["DEFAULT"]) { key } }`, nil)
	assert.Equal(t, "InternalError", r.kind(t))
	assert.Contains(t, r.Errors[0].Message, refused)

	// A filter's query on an ordinary key is a JSON value: a SQL/JSON path is not JSON, and the
	// Director's SQL statement fails.
	r = e.gql("t", `{ runtimes(filter: [{key: "a", query: "$[*] ? (@ == \"x\")"}]) { totalCount } }`, nil)
	assert.Equal(t, "InternalError", r.kind(t))
	assert.Regexp(t, `^Internal Server Error \[errorID=[0-9a-f-]{36}\]$`, r.Errors[0].Message)
	// RuntimeInput is gone from the schema (split into RuntimeRegisterInput and RuntimeUpdateInput).
	r = e.gql("t", `mutation($in: RuntimeInput!) { registerRuntime(in: $in) { id } }`, map[string]any{"in": map[string]any{"name": "a"}})
	assert.Equal(t, http.StatusUnprocessableEntity, r.code)
	assert.Contains(t, r.Errors[0].Message, `Unknown type "RuntimeInput"`)
	// A bundle's credentials are not under instanceAuth without an ID, nor in a credentials field.
	r = e.gql("t", `{ applicationsForRuntime(runtimeID: "`+id+`") { data { bundles { data { instanceAuth { credentials } } } } } }`, nil)
	assert.Equal(t, http.StatusUnprocessableEntity, r.code)
	r = e.gql("t", `{ runtimes(first: 0) { totalCount } }`, nil)
	assert.Equal(t, "InvalidData", r.kind(t))
	r = e.gql("t", `{ runtimes(after: "garbage") { totalCount } }`, nil)
	assert.Equal(t, "InvalidData", r.kind(t))
	assert.Equal(t, map[string]int{}, e.st.Snapshot().RegistrationsByRuntimeID)
	assert.Len(t, e.st.Snapshot().Tenants["t"], 1)
}

func TestRuntimeLifecycle(t *testing.T) {
	e := newEnv(t)
	d := e.ok("tenant-a", `mutation($in: RuntimeRegisterInput!) {
		registerRuntime(in: $in) { id name description labels status { condition timestamp } __typename }
	}`, map[string]any{"in": map[string]any{"name": "c-1", "description": "first",
		"labels":          map[string]any{directorstandin.RuntimeIDLabel: "rt-1", "regions": []any{"eu", "us"}},
		"statusCondition": "PROVISIONING"}})
	rt := d["registerRuntime"].(map[string]any)
	id := rt["id"].(string)
	assert.Len(t, id, 36)
	assert.Equal(t, map[string]any{"id": id, "name": "c-1", "description": "first", "__typename": "Runtime",
		"labels": map[string]any{directorstandin.RuntimeIDLabel: "rt-1", "regions": []any{"eu", "us"}},
		"status": map[string]any{"condition": "PROVISIONING", "timestamp": "2026-01-01T00:00:00Z"}}, rt)
	other := e.register("tenant-a", "c-2", map[string]any{directorstandin.RuntimeIDLabel: "rt-2"})

	// labels: set one, read one by key, under aliases and through a fragment
	e.clock.Advance(time.Minute)
	d = e.ok("tenant-a", `mutation($id: ID!) {
		a: setRuntimeLabel(runtimeID: $id, key: "runtime_consoleUrl", value: "https://console.x") { key value }
		b: setRuntimeLabel(runtimeID: $id, key: "n", value: 3) { key }
	}`, map[string]any{"id": id})
	assert.Equal(t, map[string]any{"a": map[string]any{"key": "runtime_consoleUrl", "value": "https://console.x"}, "b": map[string]any{"key": "n"}}, d)
	d = e.ok("tenant-a", `query($id: ID!, $skip: Boolean!) {
		runtime(id: $id) { ...rt console: labels(key: "runtime_consoleUrl") none: labels(key: "x") name @skip(if: $skip) }
	}
	fragment rt on Runtime { id status { condition } }`, map[string]any{"id": id, "skip": true})
	assert.Equal(t, map[string]any{"runtime": map[string]any{"id": id, "status": map[string]any{"condition": "PROVISIONING"},
		"console": map[string]any{"runtime_consoleUrl": "https://console.x"}, "none": map[string]any{}}}, d)

	// filters and pages
	const list = `query($f: [LabelFilter!], $first: Int, $after: PageCursor) {
		runtimes(filter: $f, first: $first, after: $after) { data { id } pageInfo { endCursor hasNextPage } totalCount }
	}`
	page := func(vars map[string]any) (ids []string, cursor string, more bool, total float64) {
		p := e.ok("tenant-a", list, vars)["runtimes"].(map[string]any)
		for _, r := range p["data"].([]any) {
			ids = append(ids, r.(map[string]any)["id"].(string))
		}
		info := p["pageInfo"].(map[string]any)
		return ids, info["endCursor"].(string), info["hasNextPage"].(bool), p["totalCount"].(float64)
	}
	ids, cursor, more, total := page(map[string]any{"first": 1})
	assert.Equal(t, []string{id}, ids)
	assert.True(t, more)
	assert.EqualValues(t, 2, total)
	ids, _, more, _ = page(map[string]any{"first": 1, "after": cursor})
	assert.Equal(t, []string{other}, ids)
	assert.False(t, more)
	// a query is a JSON value the label's value contains (jsonb @>)
	ids, _, _, total = page(map[string]any{"f": []any{map[string]any{"key": directorstandin.RuntimeIDLabel, "query": `"rt-2"`}}})
	assert.Equal(t, []string{other}, ids)
	assert.EqualValues(t, 1, total)
	ids, _, _, _ = page(map[string]any{"f": map[string]any{"key": "regions", "query": `"us"`}})
	assert.Equal(t, []string{id}, ids, "a list label contains the string; a single filter is coerced to a list")
	ids, _, _, _ = page(map[string]any{"f": map[string]any{"key": "regions", "query": `["us","eu"]`}})
	assert.Equal(t, []string{id}, ids, "a list label contains the list")
	ids, _, _, _ = page(map[string]any{"f": map[string]any{"key": "regions", "query": `["us","ap"]`}})
	assert.Empty(t, ids)
	ids, _, _, _ = page(map[string]any{"f": map[string]any{"key": directorstandin.RuntimeIDLabel, "query": `"rt"`}})
	assert.Empty(t, ids, "a string is contained by the equal string only")
	ids, _, _, _ = page(map[string]any{"f": map[string]any{"key": "scenarios", "query": `$[*] ? (@ == "KEB")`}})
	assert.Empty(t, ids, "on scenarios the query is a SQL/JSON path; no runtime has the label")
	ids, _, _, _ = page(map[string]any{"f": []any{map[string]any{"key": "runtime_consoleUrl"}}})
	assert.Equal(t, []string{id}, ids, "without a query: the key exists")
	ids, _, _, _ = page(map[string]any{"f": []any{map[string]any{"key": directorstandin.RuntimeIDLabel, "query": `"rt-9"`}}})
	assert.Empty(t, ids)

	// another tenant sees nothing
	d = e.ok("tenant-b", `query($id: ID!) { runtime(id: $id) { id } runtimes { totalCount } }`, map[string]any{"id": id})
	assert.Equal(t, map[string]any{"runtime": nil, "runtimes": map[string]any{"totalCount": float64(0)}}, d)
	r := e.gql("tenant-b", `mutation($id: ID!) { requestOneTimeTokenForRuntime(id: $id) { token } }`, map[string]any{"id": id})
	assert.Equal(t, "NotFound", r.kind(t))

	// an update replaces name, description and labels; no condition means INITIAL
	e.clock.Advance(time.Minute)
	d = e.ok("tenant-a", `mutation($id: ID!, $in: RuntimeUpdateInput!) { updateRuntime(id: $id, in: $in) { name description labels status { condition timestamp } } }`,
		map[string]any{"id": id, "in": map[string]any{"name": "c-1b", "labels": map[string]any{"only": "this"}}})
	assert.Equal(t, map[string]any{"name": "c-1b", "description": nil, "labels": map[string]any{"only": "this"},
		"status": map[string]any{"condition": "INITIAL", "timestamp": "2026-01-01T00:02:00Z"}}, d["updateRuntime"])

	// one-time tokens
	d = e.ok("tenant-a", `mutation($id: ID!) { t: requestOneTimeTokenForRuntime(id: $id) { token connectorURL } }`, map[string]any{"id": id})
	tok := d["t"].(map[string]any)
	assert.Equal(t, connector, tok["connectorURL"])
	assert.Len(t, tok["token"], 64)

	// unregistration, then NotFound
	const unregister = `mutation($id: ID!) { unregisterRuntime(id: $id) { id } }`
	e.ok("tenant-a", unregister, map[string]any{"id": other})
	r = e.gql("tenant-a", unregister, map[string]any{"id": other})
	assert.Equal(t, "NotFound", r.kind(t))
	assert.Contains(t, r.Errors[0].Message, "Object not found")

	snap := e.st.Snapshot()
	require.Len(t, snap.Tenants["tenant-a"], 1)
	obj := snap.Tenants["tenant-a"][0]
	assert.Equal(t, id, obj.ID)
	assert.Equal(t, directorstandin.Status{Condition: "INITIAL", Timestamp: time.Date(2026, 1, 1, 0, 2, 0, 0, time.UTC)}, obj.Status)
	assert.Equal(t, 1, obj.TokensIssued)
	assert.Equal(t, 1, obj.ValidTokens)
	assert.Equal(t, map[string]int{"registerRuntime": 1, "setRuntimeLabel": 2, "runtime": 1, "runtimes": 4,
		"updateRuntime": 1, "requestOneTimeTokenForRuntime": 1}, obj.Calls)
	assert.Equal(t, map[string]int{"rt-1": 1, "rt-2": 1}, snap.RegistrationsByRuntimeID)
	assert.Equal(t, map[string]int{"rt-2": 1}, snap.UnregistrationsByRuntimeID)
	assert.Equal(t, 2, snap.Calls["unregisterRuntime"])
	assert.NotContains(t, snap.Tenants, "tenant-b")

	// the inspection endpoint serves the same snapshot; a reset forgets everything but tokens
	_, objects := sandboxtest.Do(t, sandboxtest.Request(t, http.MethodGet, e.url+"/_sandbox/director/objects", ""))
	var served directorstandin.Objects
	require.NoError(t, json.Unmarshal([]byte(objects), &served))
	assert.Equal(t, id, served.Tenants["tenant-a"][0].ID)
	require.NoError(t, e.st.Reset(context.Background()))
	assert.Empty(t, e.st.Snapshot().Tenants)
	e.ok("tenant-a", `{ runtimes { totalCount } }`, nil)
}

func TestDuplicateRegistrationsAreCounted(t *testing.T) {
	e := newEnv(t)
	a := e.register("t", "same", map[string]any{directorstandin.RuntimeIDLabel: "rt-1"})
	b := e.register("t", "same", map[string]any{directorstandin.RuntimeIDLabel: "rt-1"})
	assert.NotEqual(t, a, b, "the Director itself does not deduplicate")
	assert.Equal(t, 2, e.st.Snapshot().RegistrationsByRuntimeID["rt-1"])
}

func TestConcurrentUse(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, _ := json.Marshal(map[string]any{"query": `mutation($in: RuntimeRegisterInput!) { registerRuntime(in: $in) { id } }`,
				"variables": map[string]any{"in": map[string]any{"name": "c", "labels": map[string]any{directorstandin.RuntimeIDLabel: string(rune('a' + i))}}}})
			req, _ := http.NewRequest(http.MethodPost, e.url+"/director/graphql", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+e.token)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Tenant", "t")
			resp, err := http.DefaultClient.Do(req)
			if assert.NoError(t, err) {
				_ = resp.Body.Close()
			}
			_ = e.st.Snapshot()
		}()
	}
	wg.Wait()
	assert.Len(t, e.st.Snapshot().Tenants["t"], 20)
}

func TestOneTimeTokensAreRevocableSystemAuths(t *testing.T) {
	e := newEnv(t)
	id := e.register("t", "rt", map[string]any{directorstandin.RuntimeIDLabel: "rt-1"})
	other := e.register("t", "rt-other", nil)
	const token = `mutation($id: ID!) { requestOneTimeTokenForRuntime(id: $id) { token } }`
	const auths = `query($id: ID!) { runtime(id: $id) { auths { id __typename } } }`
	const del = `mutation($id: ID!) { d: deleteSystemAuthForRuntime(authID: $id) { id } }`
	listAuths := func(tenant, rt string) []string {
		t.Helper()
		var ids []string
		for _, a := range e.ok(tenant, auths, map[string]any{"id": rt})["runtime"].(map[string]any)["auths"].([]any) {
			assert.Equal(t, "RuntimeSystemAuth", a.(map[string]any)["__typename"])
			ids = append(ids, a.(map[string]any)["id"].(string))
		}
		return ids
	}
	object := func(rt string) directorstandin.Object {
		t.Helper()
		for _, o := range e.st.Snapshot().Tenants["t"] {
			if o.ID == rt {
				return o
			}
		}
		t.Fatalf("runtime %s is not in the snapshot", rt)
		return directorstandin.Object{}
	}

	assert.Empty(t, listAuths("t", id), "a new runtime has no system auths")
	e.ok("t", token, map[string]any{"id": id})
	e.clock.Advance(time.Minute)
	e.ok("t", token, map[string]any{"id": id})
	e.ok("t", token, map[string]any{"id": other})
	first := listAuths("t", id)
	require.Len(t, first, 2)
	assert.NotEqual(t, first[0], first[1])
	o := object(id)
	assert.Equal(t, 2, o.TokensIssued)
	assert.Equal(t, 2, o.ValidTokens)
	assert.Equal(t, []directorstandin.SystemAuth{
		{ID: first[0], IssuedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		{ID: first[1], IssuedAt: time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)},
	}, o.Auths)

	// the list of runtimes shows the auths too
	d := e.ok("t", `{ runtimes { data { id auths { id } } } }`, nil)
	assert.Equal(t, []any{
		map[string]any{"id": id, "auths": []any{map[string]any{"id": first[0]}, map[string]any{"id": first[1]}}},
		map[string]any{"id": other, "auths": []any{map[string]any{"id": listAuths("t", other)[0]}}},
	}, d["runtimes"].(map[string]any)["data"])

	// another tenant can neither see nor delete them
	r := e.gql("t2", del, map[string]any{"id": first[0]})
	assert.Equal(t, "NotFound", r.kind(t))
	assert.Contains(t, r.Errors[0].Message, "not found")
	assert.Nil(t, r.Data, "deleteSystemAuthForRuntime is non-null, so data is null")

	// a token expires five minutes after it was issued; its system auth stays until deleted
	e.clock.Advance(directorstandin.OneTimeTokenTTL - time.Minute)
	o = object(id)
	assert.Equal(t, 1, o.ValidTokens, "the first token has expired")
	assert.Len(t, o.Auths, 2)
	assert.Len(t, listAuths("t", id), 2)

	// deleting revokes: the auth is gone from the list, and deleting it again is NotFound
	d = e.ok("t", del, map[string]any{"id": first[1]})
	assert.Equal(t, map[string]any{"d": map[string]any{"id": first[1]}}, d)
	assert.Equal(t, []string{first[0]}, listAuths("t", id))
	o = object(id)
	assert.Equal(t, 0, o.ValidTokens)
	assert.Equal(t, 2, o.TokensIssued, "tokens counts every token ever issued")
	assert.Equal(t, 1, o.Calls["deleteSystemAuthForRuntime"])
	r = e.gql("t", del, map[string]any{"id": first[1]})
	assert.Equal(t, "NotFound", r.kind(t))
	assert.Contains(t, r.Errors[0].Message, "not found")
	r = e.gql("t", del, map[string]any{"id": "no-such-auth"})
	assert.Equal(t, "NotFound", r.kind(t))
	e.ok("t", del, map[string]any{"id": first[0]})
	assert.Empty(t, listAuths("t", id))

	// a new token after the deletions is the runtime's only valid one
	e.ok("t", token, map[string]any{"id": id})
	o = object(id)
	assert.Equal(t, 3, o.TokensIssued)
	assert.Equal(t, 1, o.ValidTokens)
	assert.Equal(t, 1, object(other).ValidTokens)

	// a runtime's system auths go with it
	last := listAuths("t", id)[0]
	e.ok("t", `mutation($id: ID!) { unregisterRuntime(id: $id) { id } }`, map[string]any{"id": id})
	assert.Equal(t, "NotFound", e.gql("t", del, map[string]any{"id": last}).kind(t))
	assert.Equal(t, 6, e.st.Snapshot().Calls["deleteSystemAuthForRuntime"], "failed deletions included")
}

func TestStateSurvivesARestart(t *testing.T) {
	store := durable.NewMemoryStore()
	clock := sandboxtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func() *directorstandin.StandIn {
		t.Helper()
		o := options(clock)
		o.Store = store
		st, err := directorstandin.Open(context.Background(), o)
		require.NoError(t, err)
		return st
	}
	e := serve(t, clock, open())
	id := e.register("t/with-slash", "rt", map[string]any{directorstandin.RuntimeIDLabel: "rt-1", "big": json.Number("12345678901234567890"), "list": []any{"a"}})
	gone := e.register("t/with-slash", "gone", map[string]any{directorstandin.RuntimeIDLabel: "rt-2"})
	e.ok("t/with-slash", `mutation($id: ID!) { unregisterRuntime(id: $id) { id } }`, map[string]any{"id": gone})
	other := e.register("u", "other", nil)
	const token = `mutation($id: ID!) { requestOneTimeTokenForRuntime(id: $id) { token } }`
	e.ok("t/with-slash", token, map[string]any{"id": id})
	clock.Advance(time.Minute)
	e.ok("t/with-slash", token, map[string]any{"id": id})
	e.ok("u", token, map[string]any{"id": other})
	auths := e.st.Snapshot().Tenants["t/with-slash"][0].Auths
	require.Len(t, auths, 2)
	e.ok("t/with-slash", `mutation($id: ID!) { deleteSystemAuthForRuntime(authID: $id) { id } }`, map[string]any{"id": auths[0].ID})
	e.gql("t/with-slash", `{ runtimes { nope } }`, nil)
	before := e.st.Snapshot()

	// a new stand-in on the same store, as after kill -9, has every runtime and counter
	restarted := open()
	assert.Equal(t, before, restarted.Snapshot())
	e2 := serve(t, clock, restarted)
	const get = `query($id: ID!) { runtime(id: $id) { id name labels auths { id } } }`
	assert.Equal(t, map[string]any{"runtime": map[string]any{"id": id, "name": "rt",
		"labels": map[string]any{directorstandin.RuntimeIDLabel: "rt-1", "big": 12345678901234567890.0, "list": []any{"a"}},
		"auths":  []any{map[string]any{"id": auths[1].ID}}}}, e2.ok("t/with-slash", get, map[string]any{"id": id}))
	r := e2.gql("t/with-slash", `mutation($id: ID!) { deleteSystemAuthForRuntime(authID: $id) { id } }`, map[string]any{"id": auths[0].ID})
	assert.Equal(t, "NotFound", r.kind(t), "a deleted system auth stays deleted")
	e2.ok("t/with-slash", `mutation($id: ID!) { deleteSystemAuthForRuntime(authID: $id) { id } }`, map[string]any{"id": auths[1].ID})
	third := e2.register("t/with-slash", "third", nil)
	snap := e2.st.Snapshot()
	require.Len(t, snap.Tenants["t/with-slash"], 2)
	assert.Equal(t, []string{id, third}, []string{snap.Tenants["t/with-slash"][0].ID, snap.Tenants["t/with-slash"][1].ID},
		"registration order continues")
	assert.Equal(t, 0, snap.Tenants["t/with-slash"][0].ValidTokens)
	assert.Equal(t, 2, snap.Tenants["t/with-slash"][0].TokensIssued)
	assert.Equal(t, map[string]int{"rt-1": 1, "rt-2": 1}, snap.RegistrationsByRuntimeID)
	assert.Equal(t, map[string]int{"rt-2": 1}, snap.UnregistrationsByRuntimeID)
	assert.Equal(t, before.Calls["invalid"], snap.Calls["invalid"])
	assert.Equal(t, before.Calls["token"]+1, snap.Calls["token"], "the new server's client took one token")

	// a reset clears the store too
	require.NoError(t, e2.st.Reset(context.Background()))
	assert.Equal(t, directorstandin.Objects{Tenants: map[string][]directorstandin.Object{}, RegistrationsByRuntimeID: map[string]int{},
		UnregistrationsByRuntimeID: map[string]int{}, Calls: map[string]int{}, Applications: []directorstandin.Application{}}, open().Snapshot())
}
