// Package fence carries an operation's lease into the calls its steps make: a run may act on the
// outside world only while its lease is known to be held. The time it is known until is on the
// monotonic clock of this process, so a process that was paused (SIGSTOP, a VM freeze) finds its
// lease over at once when it runs again, whatever the wall clock says, and before it learns from
// the database that another replica took the operation over.
package fence

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrExpired: the run's lease may have expired; another replica may run the operation now.
var ErrExpired = errors.New("the operation's lease may have expired: another replica may run it now")

// Lease is the time until which a run may act: its lease's expiry as this process knows it,
// minus a margin for the clocks of the database and the other replicas.
type Lease struct {
	mu     sync.Mutex
	until  time.Time // with a monotonic reading (time.Now based)
	timer  *time.Timer
	cancel context.CancelCauseFunc
}

// New returns a lease held until until (time.Now based) and a context derived from parent that
// ends when the lease does (Extend moves that) or Stop is called. The context carries the lease
// for Check.
func New(parent context.Context, until time.Time) (context.Context, *Lease) {
	ctx, cancel := context.WithCancelCause(parent)
	l := &Lease{until: until, cancel: cancel}
	l.timer = time.AfterFunc(time.Until(until), l.expire)
	return context.WithValue(ctx, key{}, l), l
}

type key struct{}

func (l *Lease) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	// A timer that fired as Extend moved it: the lease is still held.
	if time.Now().Before(l.until) {
		return
	}
	l.cancel(ErrExpired)
}

// Extend moves the lease's end to until when that is later (a heartbeat's renewal, measured
// from before its write was sent). It reports false when the lease had already ended: a run that
// was stopped stays stopped.
func (l *Lease) Extend(until time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !time.Now().Before(l.until) {
		return false
	}
	if until.After(l.until) {
		l.until = until
		l.timer.Reset(time.Until(until))
	}
	return true
}

// Until is the lease's current end.
func (l *Lease) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Stop ends the lease's context and timer (the run is over).
func (l *Lease) Stop() {
	l.timer.Stop()
	l.cancel(context.Canceled)
}

// From returns the lease ctx carries.
func From(ctx context.Context) (*Lease, bool) {
	l, ok := ctx.Value(key{}).(*Lease)
	return l, ok
}

// Check returns an error wrapping ErrExpired when ctx carries a lease that is over now. It reads
// the clock itself rather than the context's end: right after a pause the lease's timer may not
// have fired yet. Call it before every side effect outside (clientkit does, for every request).
func Check(ctx context.Context) error {
	l, ok := From(ctx)
	if !ok {
		return nil
	}
	until := l.Until()
	if now := time.Now(); !now.Before(until) {
		return fmt.Errorf("%w (lease known until %s ago)", ErrExpired, now.Sub(until).Round(time.Millisecond))
	}
	return nil
}
