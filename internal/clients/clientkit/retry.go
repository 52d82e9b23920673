package clientkit

import (
	"context"
	"errors"
	"fmt"
	"github.com/kyma-project/kyma-environment-broker/internal/retryhint"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Policy bounds one call to a system: at most Attempts attempts within Budget, with jittered
// exponential backoff between retries of temporary failures.
type Policy struct {
	// InitialBackoff is the wait before the second attempt; it doubles with each attempt.
	InitialBackoff time.Duration
	// MaxBackoff caps the wait, Retry-After included. Zero values mean 1ms and InitialBackoff.
	MaxBackoff time.Duration
	// Attempts is the most attempts one call makes; 0 means as many as the budget and the
	// caller's context allow.
	Attempts int
	// Budget bounds the whole call, attempts and waits; 0 leaves it to the caller's context. A call
	// made inside another's budget (see Bound) keeps the outer one.
	Budget time.Duration
}

// Retry runs attempt until it succeeds, fails permanently, has been tried p.Attempts times, or the
// budget or ctx ends, sleeping with jittered exponential backoff between attempts, or as long as a
// 429/5xx answer's Retry-After asks (capped by MaxBackoff). Failures come back as *Error, with op
// as Op: temporary ones carry the last answer, for the caller to try again later.
func Retry(ctx context.Context, p Policy, op string, attempt func(context.Context) error) error {
	return retry(ctx, p, nil, op, attempt)
}

type budgetKey struct{}

// answers is what one attempt heard from the system: whether any of its requests got an answer
// that shows the system up (2xx, or a 4xx about the request).
type answers struct{ alive atomic.Bool }

type answersKey struct{}

// NoteAnswer tells the attempt running in ctx that the system answered a request with status. The
// breaker counts failures in a row per request, not per attempt: an attempt of five requests fails
// far more often than a request, and a system losing 30% of its answers is not down.
func NoteAnswer(ctx context.Context, status int) {
	if a, ok := ctx.Value(answersKey{}).(*answers); ok && !transientStatus(status) {
		a.alive.Store(true)
	}
}

// Bound bounds ctx by the policy's budget, unless ctx is already inside a call's budget: a client
// method making several calls bounds itself once, so that the calls share one budget.
func (p Policy) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if p.Budget <= 0 || ctx.Value(budgetKey{}) != nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithTimeout(ctx, p.Budget)
	return context.WithValue(ctx, budgetKey{}, true), cancel
}

func retry(ctx context.Context, p Policy, b *Breaker, op string, attempt func(context.Context) error) error {
	ctx, cancel := p.Bound(ctx)
	defer cancel()
	system := ""
	if b != nil {
		system = b.system
	}
	fail := func(e *Error) error {
		e.Op, e.System = op, system
		if until, open := b.openUntil(); open && e.Temporary {
			// The breaker is open, maybe opened by this very call's failures: the engine runs
			// the step again when it lets a probe through, not before.
			retryhint.Defer(ctx, until, "circuit to "+system+" open")
		}
		return e
	}
	backoff := max(p.InitialBackoff, time.Millisecond)
	maxBackoff := max(p.MaxBackoff, backoff)
	lastStatus := 0
	var lastFailure error
	for n := 1; ; n++ {
		probe, err := b.allow()
		if err != nil {
			// Keep what this call learnt itself; else the failures that opened the breaker.
			var oe *OpenError
			if lastFailure != nil && errors.As(err, &oe) && oe.Last != lastFailure {
				err = fmt.Errorf("%w (this call's last failure: %w)", err, lastFailure)
			}
			return fail(&Error{StatusCode: max(lastStatus, StatusOf(err)), Temporary: true, Attempts: n - 1, Err: err})
		}
		heard := &answers{}
		err = attempt(context.WithValue(ctx, answersKey{}, heard))
		// An attempt cut short by the deadline tells nothing about the service.
		cutShort := err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err())
		var busy *busyError
		switch temporary, _ := Classify(err); {
		case err == nil || !temporary || errors.As(err, &busy):
			b.record(probe, outcomeAlive, nil)
		case cutShort:
			b.record(probe, outcomeUnknown, nil)
		case heard.alive.Load():
			// One attempt may be several requests: a system that answered some of them is up, and
			// only the failure after its last answer is in a row.
			b.record(probe, outcomeFailedAfterAnswer, err)
		default:
			b.record(probe, outcomeFailed, err)
		}
		if err == nil {
			return nil
		}
		temporary, status := Classify(err)
		if !temporary {
			return fail(&Error{StatusCode: status, Attempts: n, Err: err})
		}
		if !cutShort {
			lastFailure = err
		}
		if status != 0 {
			lastStatus = status
		} else {
			status = lastStatus
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			// Report the last failure (and status) the system did give: what the caller needs to know.
			if cutShort && lastFailure != nil {
				err = lastFailure
			}
			return fail(&Error{StatusCode: status, Temporary: true, Attempts: n, Err: joinCtx(err, ctxErr)})
		}
		if p.Attempts > 0 && n >= p.Attempts {
			return fail(&Error{StatusCode: status, Temporary: true, Attempts: n, Err: err})
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		var se *StatusError
		if errors.As(err, &se) && se.RetryAfter > wait {
			wait = min(se.RetryAfter, maxBackoff)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			// Waiting would outlive the budget or the context: give up now, as the deadline would have.
			return fail(&Error{StatusCode: status, Temporary: true, Attempts: n, Err: joinCtx(err, context.DeadlineExceeded)})
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fail(&Error{StatusCode: status, Temporary: true, Attempts: n, Err: joinCtx(err, ctx.Err())})
		case <-t.C:
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

func joinCtx(err, ctxErr error) error {
	if errors.Is(err, ctxErr) {
		return err
	}
	return fmt.Errorf("%w (giving up: %w)", err, ctxErr)
}

// Defaults of a client's request timeout and backoff settings.
const (
	DefaultTimeout        = 10 * time.Second
	DefaultInitialBackoff = 200 * time.Millisecond
	DefaultMaxBackoff     = 10 * time.Second
)

// Defaults returns the request timeout and backoff settings of a client with unset (zero or
// negative) ones replaced by their defaults; a maximum backoff below the initial one is unset too.
func Defaults(timeout, initialBackoff, maxBackoff time.Duration) (time.Duration, time.Duration, time.Duration) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if initialBackoff <= 0 {
		initialBackoff = DefaultInitialBackoff
	}
	if maxBackoff < initialBackoff {
		maxBackoff = max(DefaultMaxBackoff, initialBackoff)
	}
	return timeout, initialBackoff, maxBackoff
}
