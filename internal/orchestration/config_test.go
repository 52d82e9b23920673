package orchestration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMaintenanceWindow(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	w, err := parseWindow("22:00-04:00")
	require.NoError(t, err)
	assert.True(t, w.contains(at("2026-01-01T23:00:00Z")))
	assert.True(t, w.contains(at("2026-01-01T03:59:00Z")))
	assert.False(t, w.contains(at("2026-01-01T04:00:00Z")))
	assert.Equal(t, at("2026-01-01T22:00:00Z"), w.next(at("2026-01-01T12:00:00Z")))
	assert.Equal(t, at("2026-01-01T23:00:00Z"), w.next(at("2026-01-01T23:00:00Z")), "inside: now")

	w, err = parseWindow("01:00-03:00")
	require.NoError(t, err)
	assert.Equal(t, at("2026-01-02T01:00:00Z"), w.next(at("2026-01-01T03:00:00Z")), "after today's window: tomorrow's")
	assert.Equal(t, at("2026-01-01T01:00:00Z"), w.next(at("2026-01-01T00:10:00Z")))

	for _, bad := range []string{"", "01:00", "25:00-01:00", "01:00-01:00", "a-b"} {
		_, err := parseWindow(bad)
		assert.Error(t, err, bad)
	}
}
