package clientkit

import (
	"errors"
	"net/http"
	"net/url"
)

// CheckURL reports a missing value or one that is not an absolute http(s) URL, naming the
// variable it came from (e.g. APP_AVS_URL); nil when it is fine.
func CheckURL(name, value string) error {
	if value == "" {
		return errors.New(name + " is required")
	}
	if p, err := url.Parse(value); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return errors.New(name + " must be an absolute http(s) URL")
	}
	return nil
}

// Require reports an empty value, naming the variable it came from; nil otherwise.
func Require(name, value string) error {
	if value == "" {
		return errors.New(name + " is required")
	}
	return nil
}

// Config holds what every client's configuration shares. Clients embed it, so envconfig reads its
// variables without a further prefix (APP_EXTERNAL_CALL_*, the same for every client).
type Config struct {
	// Calls bounds one call: its attempts and budget, and the breaker that fails calls at once
	// while the system is down.
	Calls Calls `envconfig:"EXTERNAL_CALL"`
	// Metrics, when set, count and time the client's requests (keb_external_* on /metrics).
	Metrics *CallMetrics `ignored:"true"`
	// Transport, when set, sends the client's requests (the embedded sandbox's in-process
	// transport); else a pooled transport of the client's own.
	Transport http.RoundTripper `ignored:"true"`
}
