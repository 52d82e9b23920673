// Package sandboxtest is for tests: it serves stand-ins of the external systems in an in-process
// sandbox on a loopback HTTP server and gives the tests of the stand-ins and of the clients that
// call them a clock they move, bounded contexts and plain HTTP requests. It is imported by _test.go
// files only.
package sandboxtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
)

// Serve registers the systems in a new sandbox and serves it on a loopback HTTP server until the
// test ends. It returns the sandbox and the server's base URL.
func Serve(t testing.TB, opts sandbox.Options, systems ...sandbox.System) (*sandbox.Sandbox, string) {
	t.Helper()
	sb := sandbox.New(opts)
	for _, sys := range systems {
		if err := sb.Register(sys); err != nil {
			t.Fatalf("registering %s: %v", sys.Name(), err)
		}
	}
	srv := httptest.NewServer(sb)
	t.Cleanup(srv.Close)
	return sb, srv.URL
}

// NewClient builds a client from its configuration, failing the test if the configuration is
// refused: NewClient(t, avs.New, cfg).
func NewClient[C, T any](t testing.TB, newClient func(C) (T, error), cfg C) T {
	t.Helper()
	c, err := newClient(cfg)
	if err != nil {
		t.Fatalf("creating the client: %v", err)
	}
	return c
}

// Context is a context with the timeout d, cancelled when the test ends.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// ClosedAddr is a loopback host:port on which nothing listens, for requests that cannot connect.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// Request is a request with the body, failing the test if it cannot be built.
func Request(t testing.TB, method, target, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, target, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// APIRequest is a request with a JSON body, bearing the token unless it is empty.
func APIRequest(t testing.TB, method, target, token, body string) *http.Request {
	t.Helper()
	req := Request(t, method, target, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	return req
}

// Send sends the request and reads the whole response, whose body it returns; the response's body
// is closed. It fails the test if the request cannot be sent or the body read.
func Send(t testing.TB, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// Do sends the request and returns the response's status and body.
func Do(t testing.TB, req *http.Request) (int, string) {
	t.Helper()
	resp, body := Send(t, req)
	return resp.StatusCode, body
}

// PostForm posts the form to target, with the basic auth user and password when given, and returns
// the response's status and body.
func PostForm(t testing.TB, target string, form url.Values, basic ...string) (int, string) {
	t.Helper()
	req := Request(t, http.MethodPost, target, form.Encode())
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	switch len(basic) {
	case 0:
	case 2:
		req.SetBasicAuth(basic[0], basic[1])
	default:
		t.Fatalf("basic auth takes a user and a password, not %q", basic)
	}
	return Do(t, req)
}

// TokenResponse is an OAuth token endpoint's answer.
type TokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int    `json:"expires_in"`
}

// Token posts the form to an OAuth token endpoint, as PostForm, and returns the token it grants;
// any other answer fails the test.
func Token(t testing.TB, target string, form url.Values, basic ...string) TokenResponse {
	t.Helper()
	code, body := PostForm(t, target, form, basic...)
	if code != http.StatusOK {
		t.Fatalf("requesting a token: HTTP %d: %s", code, body)
	}
	var tok TokenResponse
	if err := json.Unmarshal([]byte(body), &tok); err != nil {
		t.Fatalf("decoding the token response %s: %v", body, err)
	}
	return tok
}
