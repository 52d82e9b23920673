package director_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/director"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/director/directorschema"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/compass"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// captured is one GraphQL request the client sent.
type captured struct {
	Query     string         `json:"query"`
	Variables map[string]any `json:"variables"`
}

// recorder is a loopback HTTP server that issues OAuth tokens, records every GraphQL request and
// answers each root field with a canned value, so that every request of every method is seen.
type recorder struct {
	srv *httptest.Server

	mu       sync.Mutex
	requests []captured
	// found is what the runtimes look-up answers: nil for no runtime.
	found map[string]any
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /oauth/token", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"t","token_type":"bearer","expires_in":3600}`))
	})
	mux.HandleFunc("POST /graphql", r.serve)
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	return r
}

func (r *recorder) serve(w http.ResponseWriter, req *http.Request) {
	var c captured
	if err := json.NewDecoder(req.Body).Decode(&c); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.requests = append(r.requests, c)
	found := r.found
	r.mu.Unlock()
	data := map[string]any{}
	if doc, err := parser.ParseQuery(&ast.Source{Input: c.Query}); err == nil && len(doc.Operations) == 1 {
		for _, sel := range doc.Operations[0].SelectionSet {
			f, ok := sel.(*ast.Field)
			if !ok {
				continue
			}
			alias := f.Alias
			if alias == "" {
				alias = f.Name
			}
			data[alias] = canned(f.Name, found)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
}

func canned(field string, found map[string]any) any {
	rt := map[string]any{"id": "c0ffee00-0000-4000-8000-000000000001", "name": "rt", "labels": map[string]any{},
		"status": map[string]any{"condition": "INITIAL"}, "auths": []any{map[string]any{"id": "a1"}}}
	switch field {
	case "runtimes":
		if found == nil {
			return map[string]any{"data": []any{}}
		}
		return map[string]any{"data": []any{found}}
	case "runtime":
		if found != nil {
			return found
		}
		return rt
	case "setRuntimeLabel":
		return map[string]any{"key": "k"}
	case "requestOneTimeTokenForRuntime":
		return map[string]any{"token": "tok", "connectorURL": "https://connector.example/graphql"}
	default:
		return map[string]any{"id": rt["id"]}
	}
}

func (r *recorder) take() []captured {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.requests
	r.requests = nil
	return out
}

func (r *recorder) client(t *testing.T) *director.Client {
	c, err := director.New(director.Config{URL: r.srv.URL + "/graphql", OAuthTokenURL: r.srv.URL + "/oauth/token",
		OAuthClientID: "keb", OAuthClientSecret: "s", Timeout: 2 * time.Second,
		RetryInitialBackoff: time.Millisecond, RetryMaxBackoff: 5 * time.Millisecond})
	require.NoError(t, err)
	return c
}

// checkAgainstDirector fails the test for every request the real Director would refuse: a
// document or variables invalid under its schema, a label key outside its pattern or one it
// refuses to have set, a label filter whose query it cannot read as the JSON value it takes for
// such a key (directorschema/facts.json).
func checkAgainstDirector(t *testing.T, reqs []captured) {
	t.Helper()
	schema, err := directorschema.Load()
	require.NoError(t, err)
	facts := directorschema.LoadFacts()
	keyPattern := regexp.MustCompile(facts.LabelKey.Pattern)
	checkKey := func(i int, k string) {
		if k == "" || !keyPattern.MatchString(k) || len(k) > facts.LabelKey.MaxRunes {
			t.Errorf("request %d: label key %q does not match the Director's %s", i, k, facts.LabelKey.Pattern)
		}
		if slices.Contains(facts.RefusedLabels.Keys, k) {
			t.Errorf("request %d: sets label %q: the Director answers %q", i, k, facts.RefusedLabels.Problem)
		}
	}
	for i, r := range reqs {
		if err := directorschema.Validate(schema, r.Query, r.Variables); err != nil {
			t.Errorf("request %d is invalid under the Director's schema: %v\n%s", i, err, r.Query)
		}
		for name, v := range r.Variables {
			m, _ := v.(map[string]any)
			if labels, ok := m["labels"].(map[string]any); ok && (name == "in") {
				for k := range labels {
					checkKey(i, k)
				}
			}
			if filters, ok := v.([]any); ok && name == "filter" {
				for _, f := range filters {
					fm, _ := f.(map[string]any)
					key, _ := fm["key"].(string)
					q, has := fm["query"].(string)
					if has && key != "scenarios" && !json.Valid([]byte(q)) {
						t.Errorf("request %d: label filter on %q has query %q, which the Director reads as JSON for that key: not JSON", i, key, q)
					}
				}
			}
		}
		doc, err := parser.ParseQuery(&ast.Source{Input: r.Query})
		if err != nil || len(doc.Operations) != 1 {
			continue
		}
		for _, sel := range doc.Operations[0].SelectionSet {
			f, ok := sel.(*ast.Field)
			if !ok || f.Name != "setRuntimeLabel" {
				continue
			}
			if k, ok := f.ArgumentMap(r.Variables)["key"].(string); ok {
				checkKey(i, k)
			}
		}
	}
}

// Every request of every method is valid for the real Director, including writing back a runtime
// the Director gave a scenarios label and keys the provisioner keeps to itself.
func TestContractRequestsAreValidForTheDirector(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := newRecorder(t)
	c := r.client(t)

	calls := map[string]func() error{
		"RegisterRuntime (new)": func() error {
			_, err := c.RegisterRuntime(ctx, tenant, "rt-1", "c-1a2b3c", compass.ConditionProvisioning,
				compass.DirectorLabels(map[string]any{"broker_instance_id": "i-1", "global_subaccount_id": "sa",
					"kyma-project.io/idempotency-key": "op-1"}))
			return err
		},
		"UpdateRuntimeLabels": func() error {
			return c.UpdateRuntimeLabels(ctx, tenant, "c0ffee00-0000-4000-8000-000000000001",
				map[string]string{"gardenerClusterName": "c-1a2b3c", compass.ConsoleURLLabel: "https://console.example"})
		},
		"RequestOneTimeToken": func() error {
			_, err := c.RequestOneTimeToken(ctx, tenant, "c0ffee00-0000-4000-8000-000000000001")
			return err
		},
		"SystemAuths": func() error {
			_, err := c.SystemAuths(ctx, tenant, "c0ffee00-0000-4000-8000-000000000001")
			return err
		},
		"UnregisterRuntime": func() error { return c.UnregisterRuntime(ctx, tenant, "c0ffee00-0000-4000-8000-000000000001") },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, call())
			reqs := r.take()
			require.NotEmpty(t, reqs)
			checkAgainstDirector(t, reqs)
		})
	}

	// A runtime the Director labelled with scenarios is written back without them.
	r.found = map[string]any{"id": "c0ffee00-0000-4000-8000-000000000001", "name": "c-1a2b3c",
		"labels": map[string]any{director.RuntimeIDLabel: "rt-1", "scenarios": []any{"DEFAULT"}, "isNormalized": "true"},
		"status": map[string]any{"condition": "PROVISIONING"}}
	for name, call := range map[string]func() error{
		"SetRuntimeStatusCondition": func() error {
			return c.SetRuntimeStatusCondition(ctx, tenant, "c0ffee00-0000-4000-8000-000000000001", compass.ConditionConnected)
		},
		"RegisterRuntime (found, other condition)": func() error {
			_, err := c.RegisterRuntime(ctx, tenant, "rt-1", "c-1a2b3c", compass.ConditionConnected, nil)
			return err
		},
		"GetConsoleURL": func() error {
			_, err := c.GetConsoleURL(ctx, tenant, "rt-1")
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := call()
			if name != "GetConsoleURL" { // the canned runtime has no console URL label
				require.NoError(t, err)
			}
			reqs := r.take()
			require.NotEmpty(t, reqs)
			checkAgainstDirector(t, reqs)
		})
	}
}

// The runtime ID label's key is one the Director accepts, and the look-up's filter query is the
// runtime ID as a JSON string, which the Director compares with the label's value.
func TestContractRuntimeLookUp(t *testing.T) {
	facts := directorschema.LoadFacts()
	assert.Regexp(t, facts.LabelKey.Pattern, director.RuntimeIDLabel)
	r := newRecorder(t)
	_, err := r.client(t).RegisterRuntime(context.Background(), tenant, `rt "quoted"`, "c-1", "", nil)
	require.NoError(t, err)
	reqs := r.take()
	require.Len(t, reqs, 2)
	filters, _ := reqs[0].Variables["filter"].([]any)
	require.Len(t, filters, 1)
	f := filters[0].(map[string]any)
	assert.Equal(t, director.RuntimeIDLabel, f["key"])
	var value string
	require.NoError(t, json.Unmarshal([]byte(fmt.Sprint(f["query"])), &value), "the query is a JSON string")
	assert.Equal(t, `rt "quoted"`, value)
	labels := reqs[1].Variables["in"].(map[string]any)["labels"].(map[string]any)
	assert.Equal(t, `rt "quoted"`, labels[director.RuntimeIDLabel])
}

// Label keys the Director refuses are refused before anything is sent.
func TestContractRefusedLabelKeysAreNotSent(t *testing.T) {
	r := newRecorder(t)
	c := r.client(t)
	_, err := c.RegisterRuntime(context.Background(), tenant, "rt-1", "c-1", "", map[string]any{"kyma-project.io/x": "y"})
	assert.ErrorContains(t, err, `label key "kyma-project.io/x"`)
	err = c.UpdateRuntimeLabels(context.Background(), tenant, "id", map[string]string{"scenarios": "x"})
	assert.ErrorContains(t, err, `label key "scenarios"`)
	assert.Empty(t, r.take())
}
