package health

import (
	"net/http"

	"github.com/kyma-project/kyma-environment-broker/internal/unavailable"
)

// The names below are internal/unavailable's, kept here for the operator API and the
// provisioner process, which answer 503s next to their health endpoints.

// RetryAfter is how long a 503 asks clients to wait before retrying.
const RetryAfter = unavailable.RetryAfter

// UnavailableMessage is the description of a 503 caused by an unreachable database.
const UnavailableMessage = unavailable.Message

// RetryLater sets Retry-After on a response about to be answered with 503.
func RetryLater(w http.ResponseWriter) { unavailable.RetryLater(w) }

// WithRetryAfter adds Retry-After to every 503 of next that has none.
func WithRetryAfter(next http.Handler) http.Handler { return unavailable.WithRetryAfter(next) }
