package clientkit

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A ten-minute EDP outage wrote no log line until the final failure: the circuit's opening
// and closing are now logged once each at warn, with the system and its last answer, and the
// probes that fail in between (reopening the circuit) write nothing.
func TestBreakerLogsAnOutageOnceWhenItStartsAndEnds(t *testing.T) {
	m, err := NewCallMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	log, hook := test.NewNullLogger()
	m.LogTo(log)
	c, clock := newTestCaller(t, 2, m)
	down := func(context.Context) error {
		return &StatusError{Code: http.StatusServiceUnavailable, Body: "EDP is down"}
	}
	ctx := context.Background()
	for range 3 {
		_ = c.Retry(ctx, "registering x in EDP", down)
	}
	require.Equal(t, BreakerOpen, c.Breaker().State())
	// Ten probes fail, one per cool-down: the same outage.
	for range 10 {
		clock.t = clock.t.Add(time.Minute)
		_ = c.Retry(ctx, "registering x in EDP", down)
		require.Equal(t, BreakerOpen, c.Breaker().State())
	}
	require.Len(t, hook.AllEntries(), 1, "one line for the opening")
	open := hook.AllEntries()[0]
	assert.Equal(t, logrus.WarnLevel, open.Level)
	assert.Equal(t, "edp", open.Data["system"])
	assert.Contains(t, open.Data["last_answer"], "EDP is down")

	clock.t = clock.t.Add(time.Minute)
	require.NoError(t, c.Retry(ctx, "registering x in EDP", func(context.Context) error { return nil }))
	require.Equal(t, BreakerClosed, c.Breaker().State())
	require.Len(t, hook.AllEntries(), 2, "one line for the closing")
	closed := hook.AllEntries()[1]
	assert.Equal(t, logrus.WarnLevel, closed.Level)
	assert.Equal(t, "edp", closed.Data["system"])
	assert.Equal(t, "11m0s", closed.Data["open_for"])
	assert.Contains(t, closed.Data["last_answer"], "EDP is down", "the last failure before it answered")

	// Alive again: more successes log nothing.
	require.NoError(t, c.Retry(ctx, "registering y in EDP", func(context.Context) error { return nil }))
	assert.Len(t, hook.AllEntries(), 2)
}
