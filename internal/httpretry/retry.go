package httpretry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Policy shapes the exponential backoff between retries of temporary failures.
type Policy struct {
	// InitialBackoff is the wait before the second attempt; it doubles with each attempt.
	InitialBackoff time.Duration
	// MaxBackoff caps the wait, Retry-After included. Zero values mean 1ms and InitialBackoff.
	MaxBackoff time.Duration
}

// Retry runs attempt until it succeeds, fails permanently, or ctx ends, sleeping with jittered
// exponential backoff between attempts, or as long as a 429/5xx answer's Retry-After asks (capped by
// MaxBackoff). Failures come back as *Error, with op as Op.
func Retry(ctx context.Context, p Policy, op string, attempt func(context.Context) error) error {
	backoff := max(p.InitialBackoff, time.Millisecond)
	maxBackoff := max(p.MaxBackoff, backoff)
	lastStatus := 0
	var lastFailure error
	for n := 1; ; n++ {
		err := attempt(ctx)
		if err == nil {
			return nil
		}
		temporary, status := Classify(err)
		if !temporary {
			return &Error{Op: op, StatusCode: status, Attempts: n, Err: err}
		}
		// An attempt cut short by the deadline tells nothing about the service: report the last
		// failure (and status) it did give, which is what the caller needs to know.
		cutShort := ctx.Err() != nil && errors.Is(err, ctx.Err())
		if !cutShort {
			lastFailure = err
		}
		if status != 0 {
			lastStatus = status
		} else {
			status = lastStatus
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			if cutShort && lastFailure != nil {
				err = lastFailure
			}
			return &Error{Op: op, StatusCode: status, Temporary: true, Attempts: n, Err: joinCtx(err, ctxErr)}
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		var se *StatusError
		if errors.As(err, &se) && se.RetryAfter > wait {
			wait = min(se.RetryAfter, maxBackoff)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			// Waiting would outlive the context: give up now, as the deadline would have.
			return &Error{Op: op, StatusCode: status, Temporary: true, Attempts: n, Err: joinCtx(err, context.DeadlineExceeded)}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return &Error{Op: op, StatusCode: status, Temporary: true, Attempts: n, Err: joinCtx(err, ctx.Err())}
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
	DefaultTimeout        = 30 * time.Second
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
