package auth

import (
	"time"

	"github.com/sirupsen/logrus"
)

// Defaults used by NewVerifier.
const (
	// DefaultLeeway is the clock skew tolerated on exp, nbf and iat.
	DefaultLeeway = 30 * time.Second
	// DefaultJWKSRefreshInterval is how often the JWKS is re-read in the background.
	DefaultJWKSRefreshInterval = time.Hour
	// DefaultUnknownKIDRefreshInterval is the minimum time between two JWKS
	// re-reads triggered by a token whose kid is not cached.
	DefaultUnknownKIDRefreshInterval = 30 * time.Second
)

// Option tunes NewBasic and NewVerifier.
type Option func(*options)

type options struct {
	log             logrus.FieldLogger
	leeway          time.Duration
	refreshInterval time.Duration
	unknownKIDEvery time.Duration
}

func buildOptions(opts []Option) options {
	o := options{
		log:             logrus.StandardLogger(),
		leeway:          DefaultLeeway,
		refreshInterval: DefaultJWKSRefreshInterval,
		unknownKIDEvery: DefaultUnknownKIDRefreshInterval,
	}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithLogger sets the logger the denials are written to (debug level) and
// JWKS refresh failures (warning). Default: logrus.StandardLogger().
func WithLogger(l logrus.FieldLogger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithLeeway sets the clock skew tolerated on exp/nbf/iat (default 30s).
func WithLeeway(d time.Duration) Option {
	return func(o *options) {
		if d >= 0 {
			o.leeway = d
		}
	}
}

// WithJWKSRefresh sets the background JWKS refresh interval (default 1h) and
// the minimum interval between refreshes triggered by an unknown kid
// (default 30s). Zero keeps the default.
func WithJWKSRefresh(every, unknownKIDEvery time.Duration) Option {
	return func(o *options) {
		if every > 0 {
			o.refreshInterval = every
		}
		if unknownKIDEvery > 0 {
			o.unknownKIDEvery = unknownKIDEvery
		}
	}
}
