package catalog

import (
	"errors"
	"strconv"
	"strings"
)

// FieldError is a validation error that names the offending field, e.g.
// "parameters.autoScalerMin" or "context.globalaccount_id". The OSB layer
// turns it into a 400 whose description is Error().
type FieldError struct {
	// Field is the dotted path of the field: "parameters", "parameters.oidc.issuerURL",
	// "parameters.modules.list[1].name", "context.globalaccount_id", "plan_id"...
	Field string
	// Reason says what is wrong, in words meant for the user.
	Reason string
}

func (e *FieldError) Error() string {
	return e.Field + ": " + e.Reason
}

// AsFieldError reports whether err is (or wraps) a *FieldError and returns it.
func AsFieldError(err error) (*FieldError, bool) {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe, true
	}
	return nil, false
}

func fieldErr(field, reason string) *FieldError {
	return &FieldError{Field: field, Reason: reason}
}

// joinProp appends a JSON property name to a dotted path.
func joinProp(base, name string) string {
	if !isIdentifier(name) {
		return base + "[" + strconv.Quote(name) + "]"
	}
	if base == "" {
		return name
	}
	return base + "." + name
}

// joinIndex appends an array index to a dotted path.
func joinIndex(base string, i int) string {
	return base + "[" + strconv.Itoa(i) + "]"
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool {
		return !(r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
	}) < 0
}
