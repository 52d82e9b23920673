package clientkit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
)

var fast = Policy{InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}

func TestRetryUntilSuccess(t *testing.T) {
	n := 0
	err := Retry(context.Background(), fast, "op", func(context.Context) error {
		n++
		if n < 3 {
			return &StatusError{Code: 503}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 3, n)
}

func TestRetryStopsOnPermanentFailure(t *testing.T) {
	n := 0
	err := Retry(context.Background(), fast, "op", func(context.Context) error {
		n++
		return &StatusError{Code: 404}
	})
	assert.Equal(t, 1, n)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, Error{Op: "op", StatusCode: 404, Attempts: 1, Err: &StatusError{Code: 404}}, *e)
	assert.True(t, IsNotFound(err))
}

func TestRetryGivesUpWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	n := 0
	err := Retry(ctx, fast, "op", func(context.Context) error {
		n++
		return errors.New("connection refused")
	})
	assert.Greater(t, n, 1)
	assert.True(t, IsTemporary(err))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "connection refused")
}

func TestRetryDoesNotWaitPastTheDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err := Retry(ctx, Policy{InitialBackoff: time.Millisecond, MaxBackoff: time.Minute}, "op", func(context.Context) error {
		return &StatusError{Code: 429, RetryAfter: 10 * time.Second}
	})
	assert.Less(t, time.Since(start), 500*time.Millisecond, "gave up at once instead of sleeping past the deadline")
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, 429, e.StatusCode)
	assert.Equal(t, 1, e.Attempts)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestRetryHonoursRetryAfterUpToMaxBackoff(t *testing.T) {
	var times []time.Time
	err := Retry(context.Background(), Policy{InitialBackoff: time.Millisecond, MaxBackoff: 50 * time.Millisecond}, "op", func(context.Context) error {
		times = append(times, time.Now())
		if len(times) == 1 {
			return &StatusError{Code: 503, RetryAfter: time.Hour}
		}
		return nil
	})
	require.NoError(t, err)
	require.Len(t, times, 2)
	gap := times[1].Sub(times[0])
	assert.GreaterOrEqual(t, gap, 50*time.Millisecond)
	assert.Less(t, gap, time.Second)
}

func TestRetryZeroPolicy(t *testing.T) {
	n := 0
	err := Retry(context.Background(), Policy{}, "op", func(context.Context) error {
		if n++; n < 3 {
			return errors.New("reset")
		}
		return nil
	})
	require.NoError(t, err)
}

func TestDoJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			assert.Equal(t, "a=b", r.URL.RawQuery)
			assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
			assert.Equal(t, "Bearer t", r.Header.Get("Authorization"))
			w.Header().Set("Location", "/x/1")
			_, _ = w.Write([]byte(`{"name":"n"}`))
		case "/garbage":
			_, _ = w.Write([]byte(`not json`))
		default:
			w.Header().Set("Retry-After", "2")
			http.Error(w, "busy", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	auth := func(r *http.Request) { r.Header.Set("Authorization", "Bearer t") }
	var out struct{ Name string }
	resp, err := DoJSON(context.Background(), srv.Client(), auth, http.MethodPost, srv.URL, "/ok", map[string][]string{"a": {"b"}}, map[string]string{"k": "v"}, &out)
	require.NoError(t, err)
	assert.Equal(t, "n", out.Name)
	assert.Equal(t, "/x/1", resp.Header.Get("Location"))

	_, err = DoJSON(context.Background(), srv.Client(), auth, http.MethodGet, srv.URL, "/garbage", nil, nil, &out)
	temp, _ := Classify(err)
	assert.False(t, temp)
	assert.ErrorContains(t, err, "decoding GET /garbage response")

	_, err = DoJSON(context.Background(), srv.Client(), auth, http.MethodGet, srv.URL, "/busy", nil, nil, nil)
	var se *StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, StatusError{Code: 503, Body: "busy", RetryAfter: 2 * time.Second}, *se)

	_, err = DoJSON(context.Background(), srv.Client(), auth, http.MethodPost, srv.URL, "/ok", nil, func() {}, nil)
	temp, _ = Classify(err)
	assert.False(t, temp, "an unencodable request")
}

func TestAuthorizedRenewsARejectedTokenOnce(t *testing.T) {
	var issued atomic.Int32
	tokenSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, _ := r.BasicAuth()
		assert.Equal(t, "id", id)
		assert.Equal(t, "secret", secret)
		n := issued.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"tok-` + string(rune('0'+n)) + `","token_type":"bearer","expires_in":3600}`))
	}))
	defer tokenSrv.Close()
	tokens := NewTokens(tokenSrv.Client(), tokenSrv.URL, "id", "secret")

	var seen []string
	call := func(status int) func(*oauth2.Token) error {
		return func(tok *oauth2.Token) error {
			seen = append(seen, tok.AccessToken)
			if status != 0 {
				return &StatusError{Code: status}
			}
			return nil
		}
	}
	require.NoError(t, tokens.Authorized(context.Background(), call(0)))
	require.NoError(t, tokens.Authorized(context.Background(), call(0)))
	assert.Equal(t, []string{"tok-1", "tok-1"}, seen, "the token is cached")

	seen = nil
	err := tokens.Authorized(context.Background(), call(http.StatusUnauthorized))
	assert.Equal(t, 401, StatusOf(err))
	assert.Equal(t, []string{"tok-1", "tok-2"}, seen, "one retry with a new token")
	assert.EqualValues(t, 2, issued.Load())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tokens = NewTokens(tokenSrv.Client(), "http://127.0.0.1:1/unreachable", "id", "secret")
	err = tokens.Authorized(ctx, call(0))
	assert.ErrorContains(t, err, "obtaining OAuth token")
}

func TestDefaults(t *testing.T) {
	timeout, initial, maxB := Defaults(0, 0, 0)
	assert.Equal(t, []time.Duration{10 * time.Second, 200 * time.Millisecond, 10 * time.Second}, []time.Duration{timeout, initial, maxB})
	timeout, initial, maxB = Defaults(time.Second, time.Minute, time.Second)
	assert.Equal(t, []time.Duration{time.Second, time.Minute, time.Minute}, []time.Duration{timeout, initial, maxB})
	timeout, initial, maxB = Defaults(time.Second, time.Millisecond, 2*time.Millisecond)
	assert.Equal(t, []time.Duration{time.Second, time.Millisecond, 2 * time.Millisecond}, []time.Duration{timeout, initial, maxB})
}

func TestRetryStopsAfterItsAttempts(t *testing.T) {
	n := 0
	err := Retry(context.Background(), Policy{InitialBackoff: time.Millisecond, Attempts: 3}, "creating x", func(context.Context) error {
		n++
		return &StatusError{Code: 502, Body: "bad gateway"}
	})
	assert.Equal(t, 3, n)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, Error{Op: "creating x", StatusCode: 502, Temporary: true, Attempts: 3, Err: &StatusError{Code: 502, Body: "bad gateway"}}, *e)
}

func TestRetryBudgetBoundsTheCall(t *testing.T) {
	p := Policy{InitialBackoff: time.Millisecond, Budget: 50 * time.Millisecond}
	err := Retry(context.Background(), p, "op", func(ctx context.Context) error {
		<-ctx.Done() // a system that never answers
		return ctx.Err()
	})
	assert.True(t, IsTemporary(err))
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	// calls inside a bounded method share its budget instead of each starting a new one
	outer, cancel := p.Bound(context.Background())
	defer cancel()
	dl, _ := outer.Deadline()
	inner, cancel2 := p.Bound(outer)
	defer cancel2()
	dl2, _ := inner.Deadline()
	assert.Equal(t, dl, dl2)
	none, cancel3 := Policy{}.Bound(context.Background())
	defer cancel3()
	_, ok := none.Deadline()
	assert.False(t, ok)
}

func TestARequestThatCannotBeBuiltIsPermanent(t *testing.T) {
	sent := 0
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { sent++ }))
	defer srv.Close()
	auth := func(r *http.Request) { r.Header.Set("Tenant", "acme\nX-Injected: 1") }
	n := 0
	err := Retry(context.Background(), fast, "labelling x", func(ctx context.Context) error {
		n++
		_, err := DoJSON(ctx, srv.Client(), auth, http.MethodPost, srv.URL, "/", nil, nil, nil)
		return err
	})
	assert.Equal(t, 1, n)
	assert.Zero(t, sent)
	assert.False(t, IsTemporary(err))
	assert.ErrorContains(t, err, "header Tenant has a control character")
}
