// Package httpretrytest checks, in the tests of the clients of external systems, what a bounded
// call returns, and repeats calls the way a step's durable retries would.
package clientkittest

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
)

// DefaultCalls is the call policy of clientkit.Calls{} once defaults are applied.
var DefaultCalls = clientkit.Calls{}.WithDefaults()

// UntilDone calls call again while it fails temporarily, at most tries times, as the engine runs a
// step again after a temporary failure; it returns the last error.
func UntilDone(t testing.TB, tries int, call func() error) error {
	t.Helper()
	var err error
	for range tries {
		if err = call(); err == nil || !clientkit.IsTemporary(err) {
			return err
		}
	}
	return err
}

// RequireGaveUp checks what a client's call, started at start, returned during an outage (503 to
// everything): a temporary *clientkit.Error carrying the 503 after exactly the given attempts,
// returned at once rather than at the outage's end.
func RequireGaveUp(t testing.TB, err error, start time.Time, attempts int, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	assert.Less(t, time.Since(start), 2*time.Second, append([]any{"bounded by its attempts: "}, msgAndArgs...)...)
	var he *clientkit.Error
	require.ErrorAs(t, err, &he, msgAndArgs...)
	assert.True(t, he.Temporary, msgAndArgs...)
	assert.Equal(t, http.StatusServiceUnavailable, he.StatusCode, msgAndArgs...)
	assert.Equal(t, attempts, he.Attempts, msgAndArgs...)
}
