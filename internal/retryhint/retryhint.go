// Package retryhint lets a client tell the engine running a step that no retry can succeed
// before some time (a circuit breaker holds the system's calls until then), so that the step's
// next run, and the event announcing it, are at that time rather than after the step's own
// shorter interval.
package retryhint

import (
	"context"
	"sync"
	"time"
)

type holdKey struct{}

// Hold collects the holds reported during one step run. It is safe for concurrent use (a
// step may call several systems at once).
type Hold struct {
	mu     sync.Mutex
	until  time.Time
	reason string
}

// WithHold returns a context whose calls report their holds into the returned Hold.
func WithHold(ctx context.Context) (context.Context, *Hold) {
	h := &Hold{}
	return context.WithValue(ctx, holdKey{}, h), h
}

// Defer reports that calls made under ctx cannot succeed before until, and why; the latest
// time reported wins. Without a Hold in ctx it does nothing.
func Defer(ctx context.Context, until time.Time, reason string) {
	h, ok := ctx.Value(holdKey{}).(*Hold)
	if !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if until.After(h.until) {
		h.until, h.reason = until, reason
	}
}

// Until is the latest hold reported and its reason (zero time if none).
func (h *Hold) Until() (time.Time, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.until, h.reason
}
