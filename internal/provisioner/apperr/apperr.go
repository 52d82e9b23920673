// Package apperr is the provisioner's error vocabulary, shared by its service, its GraphQL
// API (as extensions.code / extensions.reason) and its clients.
package apperr

import (
	"errors"
	"fmt"
)

// Code classifies an error for API callers.
type Code string

const (
	CodeBadRequest Code = "BAD_REQUEST"
	CodeNotFound   Code = "NOT_FOUND"
	// CodeConflict: another operation on the runtime is in progress.
	CodeConflict Code = "CONFLICT"
	CodeInternal Code = "INTERNAL"
	// CodeNotSupported: the runtime's backend cannot do this (e.g. scoped credentials of a
	// gardener runtime); retrying does not help.
	CodeNotSupported Code = "NOT_SUPPORTED"
)

// Error is an error with a code and, for validation errors, the offending field's path.
type Error struct {
	Code   Code
	Field  string
	Reason string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Reason)
	}
	return e.Reason
}

// BadRequest is a validation error naming the field (a GraphQL input path such as
// "config.clusterConfig.gardenerConfig.region").
func BadRequest(field, format string, args ...any) *Error {
	return &Error{Code: CodeBadRequest, Field: field, Reason: fmt.Sprintf(format, args...)}
}

func NotFound(format string, args ...any) *Error {
	return &Error{Code: CodeNotFound, Reason: fmt.Sprintf(format, args...)}
}

func Conflict(format string, args ...any) *Error {
	return &Error{Code: CodeConflict, Reason: fmt.Sprintf(format, args...)}
}

func NotSupported(format string, args ...any) *Error {
	return &Error{Code: CodeNotSupported, Reason: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of err, CodeInternal when it carries none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}
