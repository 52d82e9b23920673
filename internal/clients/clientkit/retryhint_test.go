package clientkit

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/retryhint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A call tells the step run it is in (retryhint) when the system's circuit lets a probe through:
// the call whose failures open the circuit, and every call the open circuit refuses; a call
// that fails while the circuit stays closed, or that succeeds, tells nothing.
func TestCallsReportTheCircuitsHold(t *testing.T) {
	c, clock := newTestCallerAttempts(t, 1, 2, nil)
	down := func(context.Context) error {
		return &StatusError{Code: http.StatusServiceUnavailable, Body: "EDP is down"}
	}
	call := func(attempt func(context.Context) error) (time.Time, string, error) {
		ctx, hold := retryhint.WithHold(context.Background())
		err := c.Retry(ctx, "registering x in EDP", attempt)
		until, why := hold.Until()
		return until, why, err
	}

	until, _, err := call(down)
	require.Error(t, err)
	assert.True(t, until.IsZero(), "one failure: the circuit is still closed")

	until, why, err := call(down)
	require.Error(t, err)
	require.Equal(t, BreakerOpen, c.Breaker().State())
	assert.Equal(t, clock.t.Add(30*time.Second), until, "the call that opened the circuit reports when it lets a probe through")
	assert.Equal(t, "circuit to edp open", why)

	clock.t = clock.t.Add(10 * time.Second)
	until, _, err = call(down)
	var oe *OpenError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, oe.Until, until, "a refused call reports the circuit's reopen time")

	clock.t = clock.t.Add(21 * time.Second)
	until, _, err = call(func(context.Context) error { return nil })
	require.NoError(t, err)
	assert.True(t, until.IsZero(), "the probe got through: nothing holds the step")
	assert.Equal(t, BreakerClosed, c.Breaker().State())
}
