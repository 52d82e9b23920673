package director

import (
	"errors"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
)

// Error is returned by every Client method. It names what was being done (Op, e.g. `registering
// runtime "x" in the Director`) and tells whether the failure is temporary (worth retrying later:
// network errors, 429, 5xx, Compass's InternalError, the context ending while retrying those) or
// permanent (other 4xx, other GraphQL errors, malformed answers). It is the error type every client
// of internal/clients/clientkit returns.
type Error = clientkit.Error

// ErrNotFound is in the chain of errors about a runtime or label that does not exist.
var ErrNotFound = errors.New("not found")

// Kinds of GraphQL errors, Compass's extensions.error.
const (
	KindNotFound      = "NotFound"
	KindInvalidData   = "InvalidData"
	KindInternalError = "InternalError"
)

// GraphQLError is what the Director reported in the errors of an answer (HTTP 200, like Compass).
type GraphQLError struct {
	// Kind is Compass's extensions.error ("NotFound", "InvalidData", ...), empty when it gave none.
	Kind string
	// Message joins the messages of every error reported.
	Message string
}

func (e *GraphQLError) Error() string {
	if e.Kind == "" {
		return "Director: " + e.Message
	}
	return "Director: " + e.Kind + ": " + e.Message
}

// Is makes errors.Is(err, ErrNotFound) true for a NotFound error.
func (e *GraphQLError) Is(target error) bool { return target == ErrNotFound && e.Kind == KindNotFound }

// temporary tells whether the Director may answer differently later: only for its own internal
// errors (a database hiccup); missing objects and invalid data stay so.
func (e *GraphQLError) temporary() bool { return e.Kind == KindInternalError }

type wireError struct {
	Message    string `json:"message"`
	Extensions struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	} `json:"extensions"`
}

// fromWire reports the errors of one answer as one GraphQLError of the first error's kind.
func fromWire(errs []wireError) *GraphQLError {
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Message)
	}
	kind := errs[0].Extensions.Error
	if kind == "" {
		kind = errs[0].Extensions.Code
	}
	return &GraphQLError{Kind: kind, Message: strings.Join(msgs, "; ")}
}

// IsTemporary tells whether err is a Director failure that may go away when retried later.
func IsTemporary(err error) bool { return clientkit.IsTemporary(err) }

// IsNotFound tells whether err is about a runtime (or label) that does not exist: a NotFound
// GraphQL error, an answer 404, or a lookup that found nothing.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && (errors.Is(err, ErrNotFound) || clientkit.IsNotFound(err))
}
