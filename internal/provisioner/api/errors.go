package api

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/sirupsen/logrus"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
)

// Extension keys of the GraphQL errors the API returns.
const (
	ExtensionCode   = "code"
	ExtensionReason = "reason"
	ExtensionField  = "field"
)

// Extension keys of the real provisioner's errors (kyma-project/control-plane
// components/provisioner/internal/apperrors/presenter.go at f7d1ac25), set too: the original
// KEB tells a missing runtime by error_reason "err_db_not_found" and an error not worth a retry
// by a 4xx error_code (components/kyma-environment-broker/internal/provisioner/client.go).
const (
	ExtensionRealCode      = "error_code"
	ExtensionRealReason    = "error_reason"
	ExtensionRealComponent = "error_component"
)

// realCode is the real provisioner's error code (an HTTP status) of ours; an error refused for
// good is a 4xx, so that the original KEB does not retry it.
func realCode(c apperr.Code) int {
	switch c {
	case apperr.CodeBadRequest, apperr.CodeNotSupported:
		return 400
	case apperr.CodeNotFound:
		return 404
	case apperr.CodeConflict:
		return 409
	default:
		return 500
	}
}

// internalMessage is all a caller learns about an error without an apperr code.
const internalMessage = "internal error"

// errorPresenter turns an error into a GraphQL error whose extensions carry the apperr code,
// the reason and, for validation errors, the field:
//   - *apperr.Error (from the service, a resolver or an input unmarshaler such as Labels):
//     its code, reason and field;
//   - errors gqlgen reports about the request itself (unparsable body or query, a variable
//     of the wrong type): BAD_REQUEST, with the field when the error is about a variable;
//   - anything else: INTERNAL with a generic message; the error itself is logged.
func errorPresenter(log logrus.FieldLogger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		presented := graphql.DefaultErrorPresenter(ctx, err)
		out := &gqlerror.Error{Path: presented.Path, Locations: presented.Locations}

		var appErr *apperr.Error
		if errors.As(err, &appErr) {
			if appErr.Code == apperr.CodeBadRequest && appErr.Field == "" && len(presented.Path) > 1 {
				// An input value gqlgen could not unmarshal (a custom scalar such as Labels):
				// the path is the root field's, then the argument's.
				withField := *appErr
				withField.Field = inputField(presented.Path[1:])
				appErr = &withField
			}
			out.Message = appErr.Error()
			out.Extensions = extensions(appErr)
			if appErr.Code == apperr.CodeInternal {
				log.WithError(err).WithField("path", presented.Path.String()).Error("Provisioner API call failed")
			}
			return out
		}

		var gqlErr *gqlerror.Error
		if errors.As(err, &gqlErr) && gqlErr.Err == nil && (gqlErr.Path == nil || isVariablePath(gqlErr.Path)) {
			// gqlgen's own verdict on the request: parsing, validation, variable coercion.
			// (Errors gqlgen raises while executing, such as a nil non-null field, have a
			// field path and are internal.)
			badRequest := &apperr.Error{Code: apperr.CodeBadRequest, Field: variableField(gqlErr.Path), Reason: gqlErr.Message}
			out.Message = gqlErr.Message
			out.Path = nil
			out.Extensions = extensions(badRequest)
			return out
		}

		log.WithError(err).WithField("path", presented.Path.String()).Error("Provisioner API call failed")
		out.Message = internalMessage
		out.Extensions = extensions(&apperr.Error{Code: apperr.CodeInternal, Reason: internalMessage})
		return out
	}
}

func extensions(err *apperr.Error) map[string]any {
	ext := map[string]any{ExtensionCode: string(err.Code), ExtensionReason: err.Reason}
	if err.Field != "" {
		ext[ExtensionField] = err.Field
	}
	ext[ExtensionRealCode], ext[ExtensionRealComponent], ext[ExtensionRealReason] = realCode(err.Code), "provisioner", ""
	switch err.Code {
	case apperr.CodeNotFound:
		ext[ExtensionRealComponent], ext[ExtensionRealReason] = "db - provisioner", "err_db_not_found"
	case apperr.CodeInternal:
		ext[ExtensionRealReason] = "err_provisioner_internal"
	}
	return ext
}

// isVariablePath reports whether path points into the request's variables, as gqlgen's
// variable validation errors do: ["variable", "config", "runtimeInput", "name"].
func isVariablePath(path ast.Path) bool {
	if len(path) == 0 {
		return false
	}
	name, ok := path[0].(ast.PathName)
	return ok && name == "variable"
}

// variableField renders a variable's path as an input field path, the convention of
// apperr.Error.Field: "config.runtimeInput.name", "config.kymaConfig.components[0].component".
func variableField(path ast.Path) string {
	if !isVariablePath(path) {
		return ""
	}
	return inputField(path[1:])
}

// inputField renders a path into an input value: "config.runtimeInput.labels".
func inputField(path ast.Path) string {
	var b strings.Builder
	for _, element := range path {
		switch e := element.(type) {
		case ast.PathName:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(string(e))
		case ast.PathIndex:
			b.WriteString("[" + strconv.Itoa(int(e)) + "]")
		}
	}
	return b.String()
}

// recoverFunc logs a resolver's panic; the caller gets an INTERNAL error.
func recoverFunc(log logrus.FieldLogger) graphql.RecoverFunc {
	return func(ctx context.Context, recovered any) error {
		log.WithField("panic", fmt.Sprint(recovered)).WithField("stack", string(debug.Stack())).Error("Provisioner API resolver panicked")
		return fmt.Errorf("resolver panicked: %v", recovered)
	}
}
