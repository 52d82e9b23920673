package sandboxtest

import (
	"sync"
	"time"
)

// Clock is a time a test moves, for the Now options of the sandbox, the stand-ins and the engine.
// It is safe for concurrent use.
type Clock struct {
	mu      sync.Mutex
	t       time.Time     // a stopped clock's time
	skew    time.Duration // how far a running clock is ahead of the wall clock
	running bool
}

// NewClock is a stopped clock at t: it moves only when the test advances it.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// NewWallClock is a clock running with the wall clock, which the test can advance ahead of it.
func NewWallClock() *Clock { return &Clock{running: true} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		return time.Now().Add(c.skew)
	}
	return c.t
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		c.skew += d
		return
	}
	c.t = c.t.Add(d)
}
