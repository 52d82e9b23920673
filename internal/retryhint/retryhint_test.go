package retryhint_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/retryhint"
	"github.com/stretchr/testify/assert"
)

func TestHoldKeepsTheLatestTime(t *testing.T) {
	ctx, hold := retryhint.WithHold(context.Background())
	until, reason := hold.Until()
	assert.True(t, until.IsZero(), "nothing reported yet")
	assert.Empty(t, reason)

	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	// A context derived from the step's (a client's call budget) reports into the same hold.
	callCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	retryhint.Defer(callCtx, t0.Add(14*time.Second), "circuit to EDP open")
	retryhint.Defer(ctx, t0.Add(5*time.Second), "circuit to AVS open")
	until, reason = hold.Until()
	assert.Equal(t, t0.Add(14*time.Second), until, "an earlier hold does not shorten a later one")
	assert.Equal(t, "circuit to EDP open", reason)

	retryhint.Defer(ctx, t0.Add(time.Minute), "circuit to IAS open")
	until, reason = hold.Until()
	assert.Equal(t, t0.Add(time.Minute), until)
	assert.Equal(t, "circuit to IAS open", reason)
}

func TestDeferWithoutHoldDoesNothing(t *testing.T) {
	// A call made outside a step run (no hold in its context) must not panic or leak.
	retryhint.Defer(context.Background(), time.Now().Add(time.Hour), "circuit to EDP open")
	_, hold := retryhint.WithHold(context.Background())
	retryhint.Defer(context.Background(), time.Now().Add(time.Hour), "elsewhere")
	until, _ := hold.Until()
	assert.True(t, until.IsZero(), "another context's hold is not this one's")
}

func TestHoldConcurrentReports(t *testing.T) {
	ctx, hold := retryhint.WithHold(context.Background())
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for i := 1; i <= 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			retryhint.Defer(ctx, t0.Add(time.Duration(i)*time.Second), "system")
		}()
	}
	wg.Wait()
	until, _ := hold.Until()
	assert.Equal(t, t0.Add(50*time.Second), until)
}
