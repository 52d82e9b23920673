package ias_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/ias"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// contract is testdata/contract.json: the requests the original broker made to IAS.
type contract struct {
	Requests []contractRequest `json:"requests"`
}

type fieldSet struct {
	Required []string `json:"required"`
	Optional []string `json:"optional"`
}

type contractRequest struct {
	Name        string    `json:"name"`
	Method      string    `json:"method"`
	Path        string    `json:"path"`
	ContentType string    `json:"contentType"`
	Query       *fieldSet `json:"query"`
	Form        *fieldSet `json:"form"`
	JSON        *fieldSet `json:"json"`
	NoBody      bool      `json:"noBody"`
}

func loadContract(t *testing.T) contract {
	t.Helper()
	data, err := os.ReadFile("testdata/contract.json")
	require.NoError(t, err)
	var c contract
	require.NoError(t, json.Unmarshal(data, &c))
	require.NotEmpty(t, c.Requests)
	return c
}

// recorded is one request as the loopback server received it.
type recorded struct {
	Method      string
	Path        string
	Query       url.Values
	ContentType string
	Body        []byte
	BasicAuth   bool
}

func (r recorded) String() string {
	return fmt.Sprintf("%s %s?%s (%s) %s", r.Method, r.Path, r.Query.Encode(), r.ContentType, r.Body)
}

// pathMatches tells whether path fits pattern, whose {x} segments match any one non-empty segment.
func pathMatches(pattern, path string) bool {
	ps, xs := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(ps) != len(xs) {
		return false
	}
	for i := range ps {
		if strings.HasPrefix(ps[i], "{") {
			if xs[i] == "" {
				return false
			}
			continue
		}
		if ps[i] != xs[i] {
			return false
		}
	}
	return true
}

// jsonPaths lists the field paths of a JSON value: dotted keys, [] for array elements.
func jsonPaths(prefix string, v any, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out[p] = true
			jsonPaths(p, e, out)
		}
	case []any:
		for _, e := range v {
			jsonPaths(prefix+"[]", e, out)
		}
	}
}

// checkFields reports the required fields missing from have and the fields outside the set.
func checkFields(kind string, set fieldSet, have map[string]bool) []string {
	var problems []string
	allowed := map[string]bool{}
	for _, f := range set.Required {
		allowed[f] = true
		if !have[f] {
			problems = append(problems, fmt.Sprintf("%s field %s is missing", kind, f))
		}
	}
	for _, f := range set.Optional {
		allowed[f] = true
	}
	var extra []string
	for f := range have {
		if !allowed[f] {
			extra = append(extra, f)
		}
	}
	sort.Strings(extra)
	for _, f := range extra {
		problems = append(problems, fmt.Sprintf("%s field %s is not in the contract", kind, f))
	}
	return problems
}

// check reports how r differs from want; nil when it fits.
func (want contractRequest) check(r recorded) []string {
	if r.Method != want.Method || !pathMatches(want.Path, r.Path) {
		return []string{"method or path differ"}
	}
	var problems []string
	if !r.BasicAuth {
		problems = append(problems, "no basic auth")
	}
	query := map[string]bool{}
	for k := range r.Query {
		query[k] = true
	}
	problems = append(problems, checkFields("query", derefOr(want.Query), query)...)
	if want.NoBody && len(r.Body) > 0 {
		problems = append(problems, "a body where none belongs")
	}
	if want.ContentType != "" {
		mt, _, err := mime.ParseMediaType(r.ContentType)
		if err != nil || mt != want.ContentType {
			problems = append(problems, fmt.Sprintf("content type %q, want %q", r.ContentType, want.ContentType))
			return problems
		}
	}
	switch {
	case want.Form != nil:
		form, err := url.ParseQuery(string(r.Body))
		if err != nil {
			return append(problems, "the form does not parse: "+err.Error())
		}
		have := map[string]bool{}
		for k, v := range form {
			if len(v) > 0 && v[0] != "" {
				have[k] = true
			}
		}
		problems = append(problems, checkFields("form", *want.Form, have)...)
	case want.JSON != nil:
		var v any
		if err := json.Unmarshal(r.Body, &v); err != nil {
			return append(problems, "the JSON body does not parse: "+err.Error())
		}
		have := map[string]bool{}
		jsonPaths("", v, have)
		problems = append(problems, checkFields("JSON", *want.JSON, have)...)
	}
	return problems
}

func derefOr(s *fieldSet) fieldSet {
	if s == nil {
		return fieldSet{}
	}
	return *s
}

// match returns the contract request r fits, or why it fits none.
func (c contract) match(r recorded) (string, error) {
	var why []string
	for _, want := range c.Requests {
		problems := want.check(r)
		if len(problems) == 0 {
			return want.Name, nil
		}
		if problems[0] != "method or path differ" {
			why = append(why, want.Name+": "+strings.Join(problems, "; "))
		}
	}
	if len(why) == 0 {
		return "", fmt.Errorf("%s: no request of the contract has this method and path", r)
	}
	return "", fmt.Errorf("%s fits no request of the contract: %s", r, strings.Join(why, " | "))
}

// contractServer records requests and answers those of the contract as IAS does, with just enough
// state (service providers by name, their secrets) for the client to proceed.
type contractServer struct {
	t        *testing.T
	contract contract

	mu       sync.Mutex
	requests []recorded
	sps      []map[string]any
	secrets  int
}

func (s *contractServer) take() []recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.requests
	s.requests = nil
	return out
}

func (s *contractServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	_, _, auth := r.BasicAuth()
	rec := recorded{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), ContentType: r.Header.Get("Content-Type"), Body: body, BasicAuth: auth}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, rec)
	name, err := s.contract.match(rec)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch name {
	case "getCompany":
		writeJSON(w, http.StatusOK, map[string]any{"service_providers": s.sps,
			"identity_providers": []map[string]any{{"name": "idp-corporate", "id": "idp-1"}, {"name": "other", "id": "idp-2"}}})
	case "createServiceProvider":
		form, _ := url.ParseQuery(string(body))
		n := len(s.sps) + 1
		s.sps = append(s.sps, map[string]any{"display_name": form.Get("sp_name"), "id": fmt.Sprintf("sp-%d", n),
			"userForRest": fmt.Sprintf("client-%d", n), "clientSecrets": []map[string]any{}})
		w.WriteHeader(http.StatusCreated)
	case "createClientSecret":
		var in struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(body, &in)
		for _, sp := range s.sps {
			if sp["id"] == in.ID {
				s.secrets++
				sp["clientSecrets"] = append(sp["clientSecrets"].([]map[string]any), map[string]any{"clientSecretId": fmt.Sprintf("secret-%d", s.secrets)})
				writeJSON(w, http.StatusCreated, map[string]any{"clientId": sp["userForRest"], "clientSecret": fmt.Sprintf("value-%d", s.secrets)})
				return
			}
		}
		http.NotFound(w, r)
	case "deleteClientSecrets":
		var in struct {
			ClientID string `json:"clientId"`
		}
		_ = json.Unmarshal(body, &in)
		for _, sp := range s.sps {
			if sp["userForRest"] == in.ClientID {
				sp["clientSecrets"] = []map[string]any{}
			}
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// TestContract runs each client call against a loopback server and checks every request it sends
// against testdata/contract.json, and that the call makes the requests the contract has for it.
func TestContract(t *testing.T) {
	srv := &contractServer{t: t, contract: loadContract(t)}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c, err := ias.New(ias.Config{URL: hs.URL, UserID: "keb", Password: "pw", IdentityProvider: "idp-corporate",
		Timeout: 2 * time.Second, RetryInitialBackoff: time.Millisecond, RetryMaxBackoff: 2 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	id := "sp-1" // as the server names the first one, should the creation fail
	for _, call := range []struct {
		name string
		want []string
		run  func() error
	}{
		{"CreateServiceProvider", []string{"getCompany", "createServiceProvider"}, func() error {
			sp, err := c.CreateServiceProvider(ctx, "kyma-runtime-1")
			if err == nil {
				id = sp.ID
			}
			return err
		}},
		{"GenerateFirstSecret", []string{"createClientSecret"}, func() error {
			_, _, err := c.GenerateFirstSecret(ctx, id)
			return err
		}},
		{"GenerateSecret", []string{"getCompany", "deleteClientSecrets", "createClientSecret"}, func() error {
			_, _, err := c.GenerateSecret(ctx, id)
			return err
		}},
		{"ConfigureOIDC", []string{"setOIDCConfiguration", "setAssertionAttributes", "setSubjectNameIdentifier",
			"getCompany", "setDefaultAuthenticatingIdP", "setRBA"}, func() error {
			return configureOIDC(ctx, c, id, []string{"https://grafana.c-1.kyma.example/login/generic_oauth"})
		}},
		{"DeleteServiceProvider", []string{"deleteServiceProvider"}, func() error {
			return c.DeleteServiceProvider(ctx, id)
		}},
	} {
		t.Run(call.name, func(t *testing.T) {
			srv.take()
			callErr := call.run()
			reqs := srv.take()
			require.NotEmpty(t, reqs, "the call sends requests")
			seen := map[string]bool{}
			for _, r := range reqs {
				name, err := srv.contract.match(r)
				if assert.NoError(t, err) {
					seen[name] = true
				}
			}
			for _, name := range call.want {
				assert.True(t, seen[name], "the call makes the contract's %s request", name)
			}
			assert.NoError(t, callErr)
		})
	}
}

func configureOIDC(ctx context.Context, c *ias.Client, id string, uris []string) error {
	return c.ConfigureOIDC(ctx, id, uris)
}
