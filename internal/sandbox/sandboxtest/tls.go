package sandboxtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/directorstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
)

// ServeTLS serves every stand-in (standins) on two loopback listeners, plain HTTP and TLS, until
// the test ends. Trust its CAPEM (or CAPool) to call the TLS listener; its ConnectorURL is where
// the Director's one-time tokens point.
func ServeTLS(t testing.TB, o standins.Options) *standins.Listeners {
	t.Helper()
	l, err := standins.Listen(context.Background(), o, "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("starting the sandbox: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = l.Shutdown(ctx)
	})
	return l
}

// TLSClient is an HTTP client trusting roots and presenting cert when it is not nil.
func TLSClient(roots *x509.CertPool, cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 30 * time.Second}
}

// OneTimeToken registers a runtime named name in the sandbox Director at base (plain HTTP), in
// tenant, and requests a one-time token for it as the provisioner does. It returns the runtime's
// ID, the token and the Connector URL the token points at.
func OneTimeToken(t testing.TB, base, tenant, name string) (runtimeID, token, connectorURL string) {
	t.Helper()
	var reg struct {
		R struct {
			ID string `json:"id"`
		} `json:"r"`
	}
	DirectorGraphQL(t, base, tenant, `mutation($in: RuntimeRegisterInput!) { r: registerRuntime(in: $in) { id } }`,
		map[string]any{"in": map[string]any{"name": name}}, &reg)
	var tok struct {
		T struct {
			Token        string `json:"token"`
			ConnectorURL string `json:"connectorURL"`
		} `json:"t"`
	}
	DirectorGraphQL(t, base, tenant, `mutation($id: ID!) { t: requestOneTimeTokenForRuntime(id: $id) { token connectorURL } }`,
		map[string]any{"id": reg.R.ID}, &tok)
	return reg.R.ID, tok.T.Token, tok.T.ConnectorURL
}

// DirectorGraphQL runs a GraphQL request on the sandbox Director at base with an OAuth token of
// the sandbox's credentials and decodes its data into out; an error fails the test.
func DirectorGraphQL(t testing.TB, base, tenant, query string, vars map[string]any, out any) {
	t.Helper()
	c := standins.DefaultCredentials()
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {c.DirectorClientID}, "client_secret": {c.DirectorClientSecret}}
	access := Token(t, base+"/director/oauth/token", form).AccessToken
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		t.Fatal(err)
	}
	req := APIRequest(t, http.MethodPost, base+"/director/graphql", access, string(body))
	req.Header.Set("Tenant", tenant)
	code, resp := Do(t, req)
	var r struct {
		Data   json.RawMessage `json:"data"`
		Errors []any           `json:"errors"`
	}
	if err := json.Unmarshal([]byte(resp), &r); err != nil || code != http.StatusOK || len(r.Errors) > 0 {
		t.Fatalf("director: HTTP %d: %s", code, resp)
	}
	if err := json.Unmarshal(r.Data, out); err != nil {
		t.Fatalf("decoding the director's answer %s: %v", r.Data, err)
	}
}

// RegisterApplication registers an application in the sandbox Director at base (admin endpoint).
func RegisterApplication(t testing.TB, base string, in directorstandin.ApplicationInput) directorstandin.Application {
	t.Helper()
	return adminJSON[directorstandin.Application](t, http.MethodPost, base+"/_sandbox/director/applications", in, http.StatusCreated)
}

// ChangeApplication replaces an application's name, description, labels and bundles.
func ChangeApplication(t testing.TB, base, id string, in directorstandin.ApplicationInput) directorstandin.Application {
	t.Helper()
	return adminJSON[directorstandin.Application](t, http.MethodPut, base+"/_sandbox/director/applications/"+id, in, http.StatusOK)
}

// AssignApplication assigns an application to a runtime of its tenant.
func AssignApplication(t testing.TB, base, id, runtimeID string) {
	t.Helper()
	adminJSON[directorstandin.Application](t, http.MethodPut, base+"/_sandbox/director/applications/"+id+"/runtimes/"+runtimeID, nil, http.StatusOK)
}

// UnassignApplication removes an application from a runtime.
func UnassignApplication(t testing.TB, base, id, runtimeID string) {
	t.Helper()
	adminJSON[directorstandin.Application](t, http.MethodDelete, base+"/_sandbox/director/applications/"+id+"/runtimes/"+runtimeID, nil, http.StatusOK)
}

// SetCertificateLifetime sets the lifetime of the client certificates the Connector issues from
// now on.
func SetCertificateLifetime(t testing.TB, base string, d time.Duration) {
	t.Helper()
	adminJSON[map[string]string](t, http.MethodPut, base+"/_sandbox/connector/certificate-lifetime",
		map[string]string{"lifetime": d.String()}, http.StatusOK)
}

func adminJSON[T any](t testing.TB, method, target string, in any, want int) T {
	t.Helper()
	body := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body = string(b)
	}
	code, resp := Do(t, APIRequest(t, method, target, "", body))
	var out T
	if code != want {
		t.Fatalf("%s %s: HTTP %d, not %d: %s", method, target, code, want, resp)
	}
	if err := json.Unmarshal([]byte(resp), &out); err != nil {
		t.Fatal(fmt.Errorf("decoding %s: %w", resp, err))
	}
	return out
}
