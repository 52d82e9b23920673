package clientkit

import (
	"fmt"

	"github.com/sirupsen/logrus"
	"sync"
	"time"
)

// Breaker is a system's circuit breaker: after Threshold consecutive temporary failures of attempts
// to reach it, calls fail at once for a cool-down instead of each spending its budget on a system
// that is down; then one call at a time probes it (half-open) until one gets through. Answers that
// show the system alive (2xx, 4xx) close it. It is safe for concurrent use; a nil Breaker lets
// everything through.
type Breaker struct {
	system    string
	threshold int
	cooldown  time.Duration
	now       func() time.Time
	metrics   *CallMetrics

	mu       sync.Mutex
	state    BreakerState
	failures int       // consecutive temporary failures
	last     error     // the last of them
	retryAt  time.Time // when an open breaker lets a probe through
	probing  bool      // a half-open breaker's probe is under way
	// openedAt is when the breaker opened from closed (zero while closed): reopening after a
	// failed probe is the same outage, logged once when it starts and once when it ends.
	openedAt time.Time
}

// BreakerState is where a circuit breaker is.
type BreakerState int

// States of a breaker, also the values of the keb_external_circuit_state metric.
const (
	BreakerClosed BreakerState = iota
	BreakerOpen
	BreakerHalfOpen
)

func (s BreakerState) String() string {
	return [...]string{"closed", "open", "half-open"}[s]
}

// NewBreaker returns system's breaker, opening after threshold consecutive temporary failures for
// cooldown, its state and rejections counted in m (which may be nil). A threshold below 1 disables
// it: the result is nil.
func NewBreaker(system string, threshold int, cooldown time.Duration, m *CallMetrics) *Breaker {
	if threshold < 1 {
		return nil
	}
	b := &Breaker{system: system, threshold: threshold, cooldown: cooldown, now: time.Now, metrics: m}
	m.setState(system, BreakerClosed)
	return b
}

// OpenError is the failure of a call the breaker did not let through. It unwraps to the last
// failure that kept the breaker open, so the system's last answer (and its status) stays in the chain.
type OpenError struct {
	System   string
	Failures int
	Until    time.Time
	Last     error
}

func (e *OpenError) Error() string {
	return fmt.Sprintf("%s not called: it failed %d times in a row (circuit open until %s); last answer: %v",
		e.System, e.Failures, e.Until.UTC().Format(time.RFC3339), e.Last)
}

func (e *OpenError) Unwrap() error { return e.Last }

// State is the breaker's state now.
func (b *Breaker) State() BreakerState {
	if b == nil {
		return BreakerClosed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// openUntil reports whether the breaker is open and, if so, when it lets a probe through.
func (b *Breaker) openUntil() (time.Time, bool) {
	if b == nil {
		return time.Time{}, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.retryAt, b.state == BreakerOpen && b.now().Before(b.retryAt)
}

// allow tells whether an attempt may go out; probe is true for the one attempt a half-open breaker
// lets through, whose outcome the caller must record.
func (b *Breaker) allow() (probe bool, err error) {
	if b == nil {
		return false, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case BreakerOpen:
		if b.now().Before(b.retryAt) {
			break
		}
		b.set(BreakerHalfOpen)
		fallthrough
	case BreakerHalfOpen:
		if b.probing {
			break
		}
		b.probing = true
		return true, nil
	default:
		return false, nil
	}
	b.metrics.rejected(b.system)
	return false, &OpenError{System: b.system, Failures: b.failures, Until: b.retryAt, Last: b.last}
}

// record takes the outcome of an attempt allow let through: alive (the system answered), a
// temporary failure (err) after an answer or with none, or neither (the caller gave up on it: nothing learnt).
func (b *Breaker) record(probe bool, outcome attemptOutcome, err error) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if probe {
		b.probing = false
	}
	switch outcome {
	case outcomeAlive:
		b.set(BreakerClosed) // first: the closing's log line names the last failure
		b.failures, b.last = 0, nil
	case outcomeFailedAfterAnswer:
		// The system answered earlier in the attempt: alive, with one failure since.
		b.failures, b.last = 1, err
		b.set(BreakerClosed)
	case outcomeFailed:
		b.failures++
		b.last = err
		if b.state == BreakerHalfOpen || b.failures >= b.threshold {
			b.retryAt = b.now().Add(b.cooldown)
			b.set(BreakerOpen)
			if b.openedAt.IsZero() {
				b.openedAt = b.now()
				b.metrics.logger().WithFields(logrus.Fields{"system": b.system, "failures": b.failures, "cooldown": b.cooldown.String(), "last_answer": errString(err)}).
					Warnf("circuit to %s open: its calls fail at once, one probe every %s until it answers", b.system, b.cooldown)
			}
		}
	}
}

func (b *Breaker) set(s BreakerState) {
	if b.state != s {
		b.state = s
		b.metrics.setState(b.system, s)
	}
	if s == BreakerClosed && !b.openedAt.IsZero() {
		b.metrics.logger().WithFields(logrus.Fields{"system": b.system, "open_for": b.now().Sub(b.openedAt).Round(time.Millisecond).String(), "last_answer": errString(b.last)}).
			Warnf("circuit to %s closed: it answers again", b.system)
		b.openedAt = time.Time{}
	}
}

func errString(err error) string {
	if err == nil {
		return "answered"
	}
	return err.Error()
}

type attemptOutcome int

const (
	outcomeAlive attemptOutcome = iota
	outcomeFailed
	outcomeFailedAfterAnswer
	outcomeUnknown
)
