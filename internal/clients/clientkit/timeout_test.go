package clientkit

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A system that never answers: the request fails after the client's timeout, as a temporary
// failure of the attempt, while the caller's context goes on.
func TestARequestIsBoundedByTheClientsTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)

	c := NewHTTPClient(100*time.Millisecond, nil)
	ctx := context.Background()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	start := time.Now()
	_, err = c.Do(req)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), err)
	var timeout interface{ Timeout() bool }
	require.True(t, errors.As(err, &timeout))
	assert.True(t, timeout.Timeout())
	temporary, _ := Classify(err)
	assert.True(t, temporary)
	assert.NoError(t, ctx.Err())
}

// A system that sends its headers and then stalls: reading the body fails after the timeout.
func TestAnAnswersBodyIsBoundedByTheClientsTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"partial":`))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)

	resp, err := NewHTTPClient(100*time.Millisecond, nil).Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	start := time.Now()
	_, err = io.ReadAll(resp.Body)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
}

type contextOf struct {
	next http.RoundTripper
	ctx  context.Context
}

func (c *contextOf) RoundTrip(req *http.Request) (*http.Response, error) {
	c.ctx = req.Context()
	return c.next.RoundTrip(req)
}

// An answer is read whole within the timeout, and closing it ends the request's context (no
// timer is left behind).
func TestClosingAnAnswerEndsItsRequest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()

	seen := &contextOf{next: http.DefaultTransport}
	resp, err := NewHTTPClient(time.Minute, seen).Get(srv.URL)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.JSONEq(t, `{"ok":true}`, string(body))
	_, hasDeadline := seen.ctx.Deadline()
	assert.True(t, hasDeadline)
	assert.NoError(t, seen.ctx.Err(), "open until closed")
	require.NoError(t, resp.Body.Close())
	assert.ErrorIs(t, seen.ctx.Err(), context.Canceled)
	require.NoError(t, resp.Body.Close(), "a second close is harmless")
}
