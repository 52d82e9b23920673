package standins

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The in-process transport answers as the listener would: the same status, headers and body
// for the client, the request as the server would hand it to the handler.
func TestInProcessAnswersAsTheListener(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Seen", r.Method+" "+r.Host+" "+r.RequestURI+" "+r.URL.String()+" "+r.Proto+" "+r.Header.Get("Authorization")+" "+string(body))
		if r.URL.Path == "/created" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			w.WriteHeader(http.StatusTeapot) // ignored, as by the server
		}
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	srv := httptest.NewServer(handler)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	inproc := &http.Client{Transport: inProcess{host: host, handler: handler, next: http.DefaultTransport, gate: &gate{}}}
	network := srv.Client()

	for _, path := range []string{"/created?x=1&y=%2F", "/plain"} {
		for _, method := range []string{http.MethodPost, http.MethodHead} {
			do := func(c *http.Client) (*http.Response, string) {
				req, err := http.NewRequest(method, srv.URL+path, strings.NewReader("payload"))
				require.NoError(t, err)
				req.Header.Set("Authorization", "Bearer t")
				resp, err := c.Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				return resp, string(b)
			}
			want, wantBody := do(network)
			got, gotBody := do(inproc)
			assert.Equal(t, want.StatusCode, got.StatusCode, "%s %s", method, path)
			assert.Equal(t, want.Status, got.Status)
			assert.Equal(t, wantBody, gotBody)
			assert.Equal(t, want.ContentLength, got.ContentLength)
			for _, h := range []string{"X-Seen", "Content-Type", "Content-Length"} {
				assert.Equal(t, want.Header.Get(h), got.Header.Get(h), "%s %s %s", method, path, h)
			}
		}
	}
}

// Requests for another address go through next.
func TestInProcessPassesOtherAddressesOn(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "other") }))
	defer other.Close()
	never := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("the sandbox's handler was called") })
	c := &http.Client{Transport: inProcess{host: "127.0.0.1:1", handler: never, next: http.DefaultTransport, gate: &gate{}}}
	resp, err := c.Get(other.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	assert.Equal(t, "other", string(b))
}

// A handler that never answers holds the client only until its deadline, and a panicking one
// is an error, as a dropped connection is.
func TestInProcessHungAndPanickingHandlers(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("boom")
		}
		<-release // ignores the request's context, the worst case
	})
	tr := inProcess{host: "sandbox:1", handler: handler, next: http.DefaultTransport, gate: &gate{}}
	c := &http.Client{Transport: tr, Timeout: 200 * time.Millisecond}
	start := time.Now()
	_, err := c.Get("http://sandbox:1/hang")
	require.Error(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	var ne interface{ Timeout() bool }
	assert.True(t, errors.As(err, &ne) && ne.Timeout(), "a timeout, as over the network: %v", err)

	// The request's own deadline, as a step's bounded run sets it: the client sees its error,
	// and a timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://sandbox:1/hang", nil)
	require.NoError(t, err)
	_, err = (&http.Client{Transport: tr}).Do(req)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.True(t, errors.As(err, &ne) && ne.Timeout(), "%v", err)

	_, err = c.Get("http://sandbox:1/panic")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "panicked: boom")
}

// After Shutdown starts, new requests are refused; Shutdown waits for those being served.
func TestInProcessShutdown(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		_, _ = io.WriteString(w, "served")
	})
	l := &Listeners{URL: "http://sandbox:1"}
	c := &http.Client{Transport: inProcess{host: "sandbox:1", handler: handler, next: http.DefaultTransport, gate: &l.gate}}
	got := make(chan string, 1)
	go func() {
		resp, err := c.Get("http://sandbox:1/")
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, l.Shutdown(ctx), context.DeadlineExceeded, "a request is still being served")
	_, err := c.Get("http://sandbox:1/")
	assert.ErrorIs(t, err, ErrShutDown)
	close(release)
	assert.Equal(t, "served", <-got)
	assert.NoError(t, l.Shutdown(context.Background()), "nothing left to wait for")
}
