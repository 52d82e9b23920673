package ias_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/contracttest"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/ias"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// contract is testdata/contract.json: the requests the original broker made to IAS.
type contract struct {
	Requests []contracttest.RequestShape `json:"requests"`
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

// match returns the contract request r fits, or why it fits none; every request carries basic auth.
func (c contract) match(r contracttest.Request) (string, error) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Basic ") {
		return "", fmt.Errorf("%s: no basic auth", r)
	}
	return contracttest.MatchRequest(c.Requests, r)
}

// contractServer records requests and answers those of the contract as IAS does, with just enough
// state (service providers by name, their secrets) for the client to proceed.
type contractServer struct {
	t        *testing.T
	contract contract

	mu       sync.Mutex
	requests []contracttest.Request
	sps      []map[string]any
	secrets  int
}

func (s *contractServer) take() []contracttest.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.requests
	s.requests = nil
	return out
}

func (s *contractServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := contracttest.ReadRequest(r)
	body := rec.Body
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
