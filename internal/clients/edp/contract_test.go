package edp_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/contracttest"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/edp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// contract is testdata/contract.json: the requests the original broker made to EDP.
type contract struct {
	Token struct {
		GrantType string   `json:"grantType"`
		Scopes    []string `json:"scopes"`
	} `json:"token"`
	Requests []contracttest.RequestShape `json:"requests"`
}

func loadContract(t *testing.T) contract {
	t.Helper()
	data, err := os.ReadFile("testdata/contract.json")
	require.NoError(t, err)
	var c contract
	require.NoError(t, json.Unmarshal(data, &c))
	require.NotEmpty(t, c.Requests)
	require.NotEmpty(t, c.Token.Scopes)
	return c
}

func (c contract) match(r contracttest.Request) (string, error) {
	return contracttest.MatchRequest(c.Requests, r)
}

// contractServer records requests, serves client-credentials tokens at /oauth2/token and answers the
// requests of the contract as EDP does: 409 for an existing data tenant or metadata key.
type contractServer struct {
	contract contract

	mu       sync.Mutex
	requests []contracttest.Request
	scopes   []string // of the token requests
	tenants  map[string]map[string]string
}

func (s *contractServer) take() ([]contracttest.Request, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, sc := s.requests, s.scopes
	s.requests, s.scopes = nil, nil
	return r, sc
}

func (s *contractServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := contracttest.ReadRequest(r)
	body := rec.Body
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.URL.Path == "/oauth2/token" {
		form, _ := url.ParseQuery(string(body))
		s.scopes = append(s.scopes, form.Get("scope"))
		writeJSON(w, http.StatusOK, map[string]any{"access_token": "t", "token_type": "bearer", "expires_in": 3600})
		return
	}
	s.requests = append(s.requests, rec)
	name, err := s.contract.match(rec)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	parts := strings.Split(r.URL.Path, "/") // "", namespaces, ns, dataTenants, name, env, metadata, key
	switch name {
	case "createDataTenant":
		var in struct{ Name, Environment string }
		_ = json.Unmarshal(body, &in)
		key := in.Name + "/" + in.Environment
		if _, ok := s.tenants[key]; ok {
			w.WriteHeader(http.StatusConflict)
			return
		}
		s.tenants[key] = map[string]string{}
		w.WriteHeader(http.StatusCreated)
	case "createMetadata":
		var in struct{ Key, Value string }
		_ = json.Unmarshal(body, &in)
		md, ok := s.tenants[parts[4]+"/"+parts[5]]
		switch {
		case !ok:
			w.WriteHeader(http.StatusNotFound)
		case md[in.Key] != "":
			w.WriteHeader(http.StatusConflict)
		default:
			md[in.Key] = in.Value
			w.WriteHeader(http.StatusCreated)
		}
	case "listMetadata":
		md, ok := s.tenants[parts[4]+"/"+parts[5]]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		items := []map[string]any{}
		for k, v := range md {
			items = append(items, map[string]any{"key": k, "value": v,
				"dataTenant": map[string]any{"name": parts[4], "environment": parts[5], "namespace": map[string]any{"name": parts[2]}}})
		}
		writeJSON(w, http.StatusOK, items)
	case "deleteMetadata":
		delete(s.tenants[parts[4]+"/"+parts[5]], parts[7])
		w.WriteHeader(http.StatusNoContent)
	case "deleteDataTenant":
		delete(s.tenants, parts[4]+"/"+parts[5])
		w.WriteHeader(http.StatusNoContent)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// TestContract runs the client against a loopback server and checks every request it sends against
// testdata/contract.json: the token's scopes, each request's method, path, content type and fields,
// and the data tenant's secret.
func TestContract(t *testing.T) {
	srv := &contractServer{contract: loadContract(t), tenants: map[string]map[string]string{}}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c, err := edp.New(edp.Config{URL: hs.URL, OAuthURL: hs.URL + "/oauth2/token", ClientID: "edp-namespace;kyma-dev", ClientSecret: "s",
		Namespace: "kyma-dev", Environment: "prod", Timeout: 2 * time.Second, RetryInitialBackoff: time.Millisecond, RetryMaxBackoff: 2 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	md := map[string]string{"maasConsumerEnvironment": "CF", "maasConsumerRegion": "cf-eu10",
		"maasConsumerSubAccount": "sub-1", "maasConsumerServicePlan": "standard"}

	for _, call := range []struct {
		name string
		want []string
		run  func() error
	}{
		{"RegisterRuntime", []string{"createDataTenant", "createMetadata"}, func() error { return c.RegisterRuntime(ctx, "sub-1", md) }},
		{"RegisterRuntime again", []string{"createDataTenant"}, func() error { return c.RegisterRuntime(ctx, "sub-1", md) }},
		{"DeregisterRuntime", []string{"listMetadata", "deleteMetadata", "deleteDataTenant"}, func() error { return c.DeregisterRuntime(ctx, "sub-1") }},
	} {
		t.Run(call.name, func(t *testing.T) {
			srv.take()
			callErr := call.run()
			reqs, scopes := srv.take()
			require.NotEmpty(t, reqs)
			seen := map[string]bool{}
			for _, r := range reqs {
				name, err := srv.contract.match(r)
				if !assert.NoError(t, err) {
					continue
				}
				seen[name] = true
				if name == "createDataTenant" {
					var in struct{ Name, Environment, Secret string }
					require.NoError(t, json.Unmarshal(r.Body, &in))
					assert.Equal(t, base64.StdEncoding.EncodeToString([]byte(in.Name+in.Environment)), in.Secret, "the data tenant's secret")
				}
			}
			for _, name := range call.want {
				assert.True(t, seen[name], "the call makes the contract's %s request", name)
			}
			for _, sc := range scopes {
				assert.ElementsMatch(t, srv.contract.Token.Scopes, strings.Fields(sc), "the token request's scopes")
			}
			assert.NoError(t, callErr)
		})
	}
}

// The first call fetches a token: its scopes are the contract's.
func TestContractTokenScopes(t *testing.T) {
	srv := &contractServer{contract: loadContract(t), tenants: map[string]map[string]string{}}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c, err := edp.New(edp.Config{URL: hs.URL, OAuthURL: hs.URL + "/oauth2/token", ClientID: "edp-namespace;kyma-dev", ClientSecret: "s",
		Namespace: "kyma-dev", Timeout: 2 * time.Second, RetryInitialBackoff: time.Millisecond, RetryMaxBackoff: 2 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.DeregisterRuntime(ctx, "sub-1")
	_, scopes := srv.take()
	require.Len(t, scopes, 1, "one token request")
	assert.ElementsMatch(t, srv.contract.Token.Scopes, strings.Fields(scopes[0]))
}
