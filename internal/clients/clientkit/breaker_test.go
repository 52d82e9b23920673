package clientkit

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type testClock struct{ t time.Time }

func (c *testClock) now() time.Time { return c.t }

func newTestCaller(t *testing.T, threshold int, m *CallMetrics) (*Caller, *testClock) {
	return newTestCallerAttempts(t, 3, threshold, m)
}

func newTestCallerAttempts(t *testing.T, attempts, threshold int, m *CallMetrics) (*Caller, *testClock) {
	t.Helper()
	c := NewCaller("edp", time.Millisecond, time.Millisecond, Calls{Attempts: attempts, Timeout: time.Minute, BreakerThreshold: threshold, BreakerCooldown: 30 * time.Second}, m)
	clock := &testClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.breaker.now = clock.now
	return c, clock
}

func TestBreakerFailsCallsAtOnceWhileTheSystemIsDown(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewCallMetrics(reg)
	require.NoError(t, err)
	c, clock := newTestCaller(t, 4, m)
	var sent atomic.Int32
	down := func(context.Context) error {
		sent.Add(1)
		return &StatusError{Code: http.StatusServiceUnavailable, Body: "EDP is down"}
	}

	// 3 attempts, then 1 more opens the breaker
	err = c.Retry(context.Background(), "registering x in EDP", down)
	assert.True(t, IsTemporary(err))
	assert.Equal(t, BreakerClosed, c.Breaker().State())
	err = c.Retry(context.Background(), "registering x in EDP", down)
	assert.EqualValues(t, 4, sent.Load(), "the breaker opened after the 4th failure in a row")
	assert.Equal(t, BreakerOpen, c.Breaker().State())
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, 1, e.Attempts)
	assert.Equal(t, "edp", e.System)

	// open: no request goes out, the error names the system and its last answer
	err = c.Retry(context.Background(), "registering y in EDP", down)
	assert.EqualValues(t, 4, sent.Load())
	require.ErrorAs(t, err, &e)
	assert.True(t, e.Temporary)
	assert.Equal(t, 0, e.Attempts)
	assert.Equal(t, http.StatusServiceUnavailable, e.StatusCode)
	var oe *OpenError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, 4, oe.Failures)
	assert.EqualError(t, err, "registering y in EDP: temporary failure: edp not called: it failed 4 times in a row "+
		"(circuit open until 2026-01-01T00:00:30Z); last answer: HTTP 503: EDP is down")

	// after the cool-down one probe goes out; failing, it opens the breaker again at once
	clock.t = clock.t.Add(30 * time.Second)
	err = c.Retry(context.Background(), "registering y in EDP", down)
	assert.EqualValues(t, 5, sent.Load(), "one probe")
	require.ErrorAs(t, err, &e)
	assert.Equal(t, 1, e.Attempts)
	assert.Equal(t, BreakerOpen, c.Breaker().State())

	// a probe that gets an answer closes it
	clock.t = clock.t.Add(30 * time.Second)
	require.NoError(t, c.Retry(context.Background(), "registering y in EDP", func(context.Context) error { return nil }))
	assert.Equal(t, BreakerClosed, c.Breaker().State())

	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP keb_external_circuit_rejections_total Calls to a system its open circuit breaker failed at once, without sending a request.
# TYPE keb_external_circuit_rejections_total counter
keb_external_circuit_rejections_total{system="edp"} 3
# HELP keb_external_circuit_state State of a system's circuit breaker: 0 closed, 1 open (calls fail at once), 2 half-open (one probe at a time).
# TYPE keb_external_circuit_state gauge
keb_external_circuit_state{system="edp"} 0
`), "keb_external_circuit_state", "keb_external_circuit_rejections_total"))
}

func TestHalfOpenBreakerLetsOneProbeThrough(t *testing.T) {
	c, clock := newTestCaller(t, 1, nil)
	require.Error(t, c.Retry(context.Background(), "op", func(context.Context) error { return errors.New("connection refused") }))
	require.Equal(t, BreakerOpen, c.Breaker().State())
	clock.t = clock.t.Add(time.Minute)

	probing := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error)
	go func() {
		done <- c.Retry(context.Background(), "probe", func(context.Context) error {
			close(probing)
			<-release
			return nil
		})
	}()
	<-probing
	assert.Equal(t, BreakerHalfOpen, c.Breaker().State())
	calls := 0
	err := c.Retry(context.Background(), "other", func(context.Context) error { calls++; return nil })
	assert.Zero(t, calls, "a second call waits for the probe's verdict by failing at once")
	var oe *OpenError
	require.ErrorAs(t, err, &oe)
	assert.ErrorContains(t, err, "connection refused")
	close(release)
	require.NoError(t, <-done)
	require.NoError(t, c.Retry(context.Background(), "other", func(context.Context) error { calls++; return nil }))
	assert.Equal(t, 1, calls)
}

func TestAnswersThatShowTheSystemAliveResetTheCount(t *testing.T) {
	c, _ := newTestCallerAttempts(t, 1, 3, nil)
	results := []error{&StatusError{Code: 502}, &StatusError{Code: 502}, &StatusError{Code: 404}, &StatusError{Code: 502}, &StatusError{Code: 502}}
	for _, r := range results {
		_ = c.Retry(context.Background(), "op", func(context.Context) error { return r })
	}
	assert.Equal(t, BreakerClosed, c.Breaker().State(), "a 404 is an answer: never 3 failures in a row")

	// an attempt the caller cut short tells nothing
	ctx, cancel := context.WithCancel(context.Background())
	err := c.Retry(ctx, "op", func(ctx context.Context) error { cancel(); return ctx.Err() })
	assert.True(t, IsTemporary(err))
	assert.Equal(t, BreakerClosed, c.Breaker().State())
}

func TestBreakerOff(t *testing.T) {
	c := NewCaller("x", time.Millisecond, time.Millisecond, Calls{Attempts: 1, BreakerThreshold: -1}, nil)
	assert.Nil(t, c.Breaker())
	for i := 0; i < 20; i++ {
		n := 0
		_ = c.Retry(context.Background(), "op", func(context.Context) error { n++; return &StatusError{Code: 500} })
		require.Equal(t, 1, n)
	}
	assert.Equal(t, BreakerClosed, c.Breaker().State())
}

func TestCallsDefaults(t *testing.T) {
	assert.Equal(t, Calls{Attempts: 3, Timeout: 15 * time.Second, BreakerThreshold: 10, BreakerCooldown: 15 * time.Second}, Calls{}.WithDefaults())
	assert.Equal(t, -1, Calls{BreakerThreshold: -1}.WithDefaults().BreakerThreshold)
}

func TestABusyAnswerDoesNotOpenTheBreaker(t *testing.T) {
	c, _ := newTestCallerAttempts(t, 1, 2, nil)
	for i := 0; i < 5; i++ {
		err := c.Retry(context.Background(), "op", func(context.Context) error { return Busy(errors.New("still creating")) })
		assert.True(t, IsTemporary(err))
	}
	assert.Equal(t, BreakerClosed, c.Breaker().State())
}

// An attempt of several requests that fails at its last one (a lost response after the lookups
// were answered) is one failure in a row, not another: a system losing a share of its answers stays
// callable however many requests an attempt makes, while one that answers nothing still opens it.
func TestBreakerCountsFailuresAfterTheSystemsLastAnswer(t *testing.T) {
	c, clock := newTestCallerAttempts(t, 1, 3, nil)
	lookupsThenLost := func(ctx context.Context) error {
		NoteAnswer(ctx, http.StatusOK)       // lookup by name: nothing
		NoteAnswer(ctx, http.StatusNotFound) // an answer about the request: the system is up
		NoteAnswer(ctx, http.StatusBadGateway)
		return &StatusError{Code: http.StatusBadGateway, Body: "lost"}
	}
	for range 10 {
		err := c.Retry(context.Background(), "provisioning x", lookupsThenLost)
		assert.True(t, IsTemporary(err))
		var oe *OpenError
		assert.False(t, errors.As(err, &oe), "the breaker let the call through")
	}
	assert.Equal(t, BreakerClosed, c.Breaker().State())

	noAnswer := func(ctx context.Context) error {
		NoteAnswer(ctx, http.StatusServiceUnavailable)
		return &StatusError{Code: http.StatusServiceUnavailable, Body: "down"}
	}
	for range 2 {
		_ = c.Retry(context.Background(), "provisioning x", noAnswer)
	}
	assert.Equal(t, BreakerOpen, c.Breaker().State(), "1 after the last answer + 2 without one")

	// a half-open probe that hears an answer closes the breaker even if the attempt then fails
	clock.t = clock.t.Add(30 * time.Second)
	_ = c.Retry(context.Background(), "provisioning x", lookupsThenLost)
	assert.Equal(t, BreakerClosed, c.Breaker().State())
}
