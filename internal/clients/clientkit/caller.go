package clientkit

import (
	"context"
	"time"
)

// Calls bounds every call a client makes to its system. Every client reads it from the same
// APP_EXTERNAL_CALL_* variables (its Config field is tagged envconfig:"EXTERNAL_CALL").
type Calls struct {
	// Attempts is the most attempts of one call: a temporary failure after them goes back to the
	// step, which tries again later without holding a worker.
	Attempts int `envconfig:"ATTEMPTS" default:"3"`
	// Timeout is one call's budget, its attempts and the waits between them.
	Timeout time.Duration `envconfig:"TIMEOUT" default:"15s"`
	// BreakerThreshold consecutive temporary failures of a system open its circuit breaker; 0
	// turns the breaker off.
	BreakerThreshold int `envconfig:"BREAKER_THRESHOLD" default:"10"`
	// BreakerCooldown is how long an open breaker fails calls at once before letting a probe through.
	BreakerCooldown time.Duration `envconfig:"BREAKER_COOLDOWN" default:"15s"`
}

// Defaults of Calls.
const (
	DefaultAttempts         = 3
	DefaultCallTimeout      = 15 * time.Second
	DefaultBreakerThreshold = 10
	DefaultBreakerCooldown  = 15 * time.Second
)

// WithDefaults replaces unset (zero) settings by their defaults; a negative threshold (breaker
// off) is kept.
func (c Calls) WithDefaults() Calls {
	if c.Attempts <= 0 {
		c.Attempts = DefaultAttempts
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultCallTimeout
	}
	if c.BreakerThreshold == 0 {
		c.BreakerThreshold = DefaultBreakerThreshold
	}
	if c.BreakerCooldown <= 0 {
		c.BreakerCooldown = DefaultBreakerCooldown
	}
	return c
}

// Caller makes a client's calls to its system: each bounded by the policy, all through the
// system's breaker. It is safe for concurrent use.
type Caller struct {
	policy  Policy
	breaker *Breaker
}

// NewCaller returns the caller of system (the name its errors, breaker and metrics carry) with the
// given backoff and calls (defaults applied), counting breaker state in m (which may be nil).
func NewCaller(system string, initialBackoff, maxBackoff time.Duration, calls Calls, m *CallMetrics) *Caller {
	calls = calls.WithDefaults()
	return &Caller{
		policy:  Policy{InitialBackoff: initialBackoff, MaxBackoff: maxBackoff, Attempts: calls.Attempts, Budget: calls.Timeout},
		breaker: NewBreaker(system, calls.BreakerThreshold, calls.BreakerCooldown, m),
	}
}

// Retry is the package's Retry with the caller's policy, through its breaker.
func (c *Caller) Retry(ctx context.Context, op string, attempt func(context.Context) error) error {
	return retry(ctx, c.policy, c.breaker, op, attempt)
}

// Bound bounds ctx by one call's budget, for a client method making several calls that share it.
func (c *Caller) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return c.policy.Bound(ctx)
}

// Breaker is the caller's breaker, nil when it is off.
func (c *Caller) Breaker() *Breaker { return c.breaker }
