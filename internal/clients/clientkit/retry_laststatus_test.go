package clientkit

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGivingUpReportsTheLastStatusAnswered(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	err := Retry(ctx, Policy{InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}, "creating x", func(ctx context.Context) error {
		calls++
		if calls < 3 {
			return &StatusError{Code: http.StatusServiceUnavailable, Body: "busy"}
		}
		cancel() // the deadline cuts this attempt short: no status of its own
		return ctx.Err()
	})
	var e *Error
	require.True(t, errors.As(err, &e), "%v", err)
	assert.Equal(t, http.StatusServiceUnavailable, e.StatusCode)
	assert.True(t, e.Temporary)
	assert.Equal(t, 3, e.Attempts)
	assert.ErrorContains(t, err, "busy", "the last answer, not only its status")
	assert.ErrorIs(t, err, context.Canceled)
}
