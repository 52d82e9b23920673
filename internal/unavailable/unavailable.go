// Package unavailable is how the broker's HTTP answers say "the database is unavailable, retry
// later": the 503's description and its Retry-After. The OSB API (internal/broker), the operator
// API and health share it without depending on one another.
package unavailable

import (
	"net/http"
	"strconv"
	"time"
)

// RetryAfter is how long a 503 asks clients to wait before retrying: long enough not to
// hammer a database that is restarting, short enough that platforms' polling barely notices.
const RetryAfter = 5 * time.Second

// Message is the description of a 503 caused by an unreachable database.
const Message = "the broker's database is unavailable; retry later"

// FullMessage is the description of a 503 caused by a full database storage (disk).
const FullMessage = "the broker's storage is full; retry later"

// RetryLater sets Retry-After on a response about to be answered with 503.
func RetryLater(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(int(RetryAfter/time.Second)))
}

// WithRetryAfter adds Retry-After to every 503 of next that has none (brokerapi writes its
// failure responses without a way to set headers).
func WithRetryAfter(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&retryAfterWriter{ResponseWriter: w}, r)
	})
}

type retryAfterWriter struct{ http.ResponseWriter }

func (w *retryAfterWriter) WriteHeader(code int) {
	if code == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		RetryLater(w)
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer (flushing, deadlines).
func (w *retryAfterWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
