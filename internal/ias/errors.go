package ias

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Error is returned by every Client method. It names what was being done and tells whether the
// failure is temporary (worth retrying later: network errors, 429, 5xx, the context ending while
// retrying those) or permanent (4xx, malformed responses).
type Error struct {
	// Op is what was being done, e.g. `creating IAS service provider "x"`.
	Op string
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
	return fmt.Sprintf("%s: %s failure after %d attempt(s): %v", e.Op, kind, e.Attempts, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// IsTemporary tells whether err is an IAS failure that may go away when retried later.
func IsTemporary(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Temporary
}

// IsNotFound tells whether err is an IAS answer 404.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.StatusCode == http.StatusNotFound
}

// statusError is a non-2xx answer of the API.
type statusError struct {
	code       int
	body       string
	retryAfter time.Duration
}

func (e *statusError) Error() string {
	if e.body == "" {
		return fmt.Sprintf("HTTP %d", e.code)
	}
	return fmt.Sprintf("HTTP %d: %s", e.code, e.body)
}

func newStatusError(resp *http.Response, body []byte) *statusError {
	const maxBody = 512
	if len(body) > maxBody {
		body = body[:maxBody]
	}
	e := &statusError{code: resp.StatusCode, body: string(body)}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.retryAfter = time.Duration(s) * time.Second
	}
	return e
}

// permanentError marks failures that retrying cannot fix, such as an undecodable response.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func transientStatus(code int) bool {
	return code == http.StatusTooManyRequests || code >= 500
}

// classify tells whether err, from one attempt, is worth retrying, and the HTTP status involved.
func classify(err error) (temporary bool, status int) {
	var se *statusError
	if errors.As(err, &se) {
		return transientStatus(se.code), se.code
	}
	var pe *permanentError
	if errors.As(err, &pe) {
		return false, 0
	}
	// Network errors (refused connections, resets, truncated bodies) and timeouts, the per-request
	// one included. The retry loop stops anyway once the caller's context has ended.
	return true, 0
}
