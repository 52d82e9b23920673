package sandboxtest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/httpretry"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
)

// Outage makes system answer 503 for longer than the test runs.
func Outage(t testing.TB, sb *sandbox.Sandbox, system string) {
	t.Helper()
	now := time.Now()
	require.NoError(t, sb.SetFaults(system, sandbox.Faults{OutageFrom: now.Add(-time.Minute), OutageUntil: now.Add(time.Hour)}))
}

// RequireGaveUp checks what a client's call, started at start, returned during an outage longer
// than the caller's deadline: an *httpretry.Error after more than one attempt that carries the
// deadline and the outage's 503, returned soon after the deadline rather than at the outage's end.
func RequireGaveUp(t testing.TB, err error, start time.Time, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	assert.Less(t, time.Since(start), 2*time.Second, append([]any{"bounded by the context: "}, msgAndArgs...)...)
	assert.ErrorIs(t, err, context.DeadlineExceeded, msgAndArgs...)
	var he *httpretry.Error
	require.ErrorAs(t, err, &he, msgAndArgs...)
	assert.Equal(t, http.StatusServiceUnavailable, he.StatusCode, msgAndArgs...)
	assert.Greater(t, he.Attempts, 1, msgAndArgs...)
}
