package testenv

import (
	"context"
	"testing"
	"time"
)

// Background runs run in a goroutine until the returned stop, which the end of the test calls
// too: stop cancels run's context and fails the test unless run returns nil within 10 seconds.
func Background(t testing.TB, run func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("stopping: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("did not stop within 10s")
		}
	}
	t.Cleanup(stop)
	return stop
}
