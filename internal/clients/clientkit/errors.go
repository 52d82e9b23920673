// Package clientkit holds what the broker's clients of external HTTP APIs (AVS, EDP, IAS) share: the
// Error they return, the classification of failures into temporary (network errors, 429, 5xx) and
// permanent ones, the retry loop with jittered exponential backoff that honours Retry-After and the
// caller's context, one JSON request, and OAuth2 client-credentials tokens renewed when the server
// rejects them.
package clientkit

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/oauth2"
)

// Error is returned by every client call. It names what was being done and tells whether the
// failure is temporary (worth retrying later: network errors, 429, 5xx, the context ending while
// retrying those) or permanent (4xx, malformed responses).
type Error struct {
	// Op is what was being done, e.g. `creating AVS evaluation "x"`.
	Op string
	// System is the system called, as its Caller names it (e.g. "ias"); empty when unknown.
	System string
	// StatusCode is the HTTP status of the last response, 0 when there was none.
	StatusCode int
	// Temporary tells whether trying again later may succeed.
	Temporary bool
	// Attempts is how many times the call was tried.
	Attempts int
	// Err is the last underlying error.
	Err error
}

func (e *Error) Error() string {
	kind := "permanent"
	if e.Temporary {
		kind = "temporary"
	}
	if e.Attempts == 0 {
		return fmt.Sprintf("%s: %s failure: %v", e.Op, kind, e.Err)
	}
	return fmt.Sprintf("%s: %s failure after %d attempt(s): %v", e.Op, kind, e.Attempts, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// IsTemporary tells whether err is an *Error that may go away when retried later.
func IsTemporary(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Temporary
}

// Retryable tells whether a caller should try err's call again later: an *Error says so itself;
// any other failure not marked Permanent (a network error, a plain error of a stand-in) counts as
// temporary.
func Retryable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Temporary
	}
	temporary, _ := Classify(err)
	return temporary
}

// IsNotFound tells whether err is an *Error for an answer 404.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.StatusCode == http.StatusNotFound
}

// StatusError is a non-2xx answer of an API, as one attempt sees it.
type StatusError struct {
	Code int
	// Body is the start of the response body.
	Body string
	// RetryAfter is the wait the Retry-After header asks for, 0 when there is none.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("HTTP %d", e.Code)
	}
	return fmt.Sprintf("HTTP %d: %s", e.Code, e.Body)
}

// NewStatusError describes resp, whose body was body.
func NewStatusError(resp *http.Response, body []byte) *StatusError {
	const maxBody = 512
	if len(body) > maxBody {
		body = body[:maxBody]
	}
	e := &StatusError{Code: resp.StatusCode, Body: string(body)}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// StatusOf returns the HTTP status of the StatusError in err's chain, 0 when there is none.
func StatusOf(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

// IgnoreNotFound returns nil for an answer 404 and err otherwise.
func IgnoreNotFound(err error) error {
	if StatusOf(err) == http.StatusNotFound {
		return nil
	}
	return err
}

// permanentError marks failures that retrying cannot fix, such as an undecodable response.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as a failure that retrying cannot fix.
func Permanent(err error) error { return &permanentError{err} }

// busyError marks a temporary failure that the system itself reported as such (an object still busy
// with another operation): worth retrying, but no sign that the system is sick.
type busyError struct{ err error }

func (e *busyError) Error() string { return e.err.Error() }
func (e *busyError) Unwrap() error { return e.err }

// Busy marks err as a wait the system asked for while answering normally: temporary, and not a
// failure that counts towards opening its breaker.
func Busy(err error) error { return &busyError{err} }

func transientStatus(code int) bool {
	return code == http.StatusTooManyRequests || code >= 500
}

// Classify tells whether err, from one attempt, is worth retrying, and the HTTP status involved.
func Classify(err error) (temporary bool, status int) {
	var oe *OpenError
	if errors.As(err, &oe) {
		return true, StatusOf(err)
	}
	var se *StatusError
	if errors.As(err, &se) {
		return transientStatus(se.Code), se.Code
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.Response == nil {
			return true, 0
		}
		return transientStatus(re.Response.StatusCode), re.Response.StatusCode
	}
	var pe *permanentError
	if errors.As(err, &pe) {
		return false, 0
	}
	// Network errors (refused connections, resets, truncated bodies) and timeouts, the per-request
	// one included. The retry loop stops anyway once the caller's context has ended.
	return true, 0
}
