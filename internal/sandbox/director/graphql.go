package director

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"
)

// This file executes a GraphQL request against the schema: gqlparser parses and validates it and
// coerces its variables; the stand-in resolves each root field by name and projects the result
// onto the requested selection set (aliases, fragments, @skip/@include and __typename included).

// object is a GraphQL object value: its fields by name. A field whose value is a fieldFunc is
// resolved with the arguments the request gives that field.
type object map[string]any

type fieldFunc func(args map[string]any) any

// Error kinds Compass puts in extensions.error.
const (
	kindNotFound       = "NotFound"
	kindInvalidData    = "InvalidData"
	kindTenantRequired = "TenantRequired"
	kindInternal       = "InternalError"
)

// Codes gqlgen, which Compass uses, puts in extensions.code of protocol errors.
const (
	codeParseFailed      = "GRAPHQL_PARSE_FAILED"
	codeValidationFailed = "GRAPHQL_VALIDATION_FAILED"
)

// apiError is a resolver failure, answered with HTTP 200 like any Compass resolver error.
type apiError struct{ kind, msg string }

func (e *apiError) Error() string { return e.msg }

func notFound(format string, args ...any) error {
	return &apiError{kind: kindNotFound, msg: "Object not found [" + fmt.Sprintf(format, args...) + "]"}
}

// invalidData names the input type and the offending field, in Compass's message format.
func invalidData(input, field, problem string) error {
	return &apiError{kind: kindInvalidData, msg: fmt.Sprintf("Invalid data %s [%s=%s]", input, field, problem)}
}

type gqlError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path,omitempty"`
	Extensions map[string]any `json:"extensions,omitempty"`
}

type response struct {
	Data   any        `json:"data"`
	Errors []gqlError `json:"errors,omitempty"`
}

type request struct {
	Query         string         `json:"query"`
	OperationName string         `json:"operationName"`
	Variables     map[string]any `json:"variables"`
}

// prepare parses and validates the request and coerces its variables. Its errors are protocol
// errors, which gqlgen answers with 422.
func (s *StandIn) prepare(req request) (*ast.OperationDefinition, map[string]any, []gqlError) {
	if strings.TrimSpace(req.Query) == "" {
		return nil, nil, []gqlError{protocolError(codeValidationFailed, "no operation provided", nil)}
	}
	doc, err := parser.ParseQuery(&ast.Source{Input: req.Query})
	if err != nil {
		return nil, nil, []gqlError{protocolError(codeParseFailed, gqlMessage(err), nil)}
	}
	if errs := validator.ValidateWithRules(s.schema, doc, nil); len(errs) > 0 {
		out := make([]gqlError, 0, len(errs))
		for _, e := range errs {
			out = append(out, protocolError(codeValidationFailed, e.Message, e.Path))
		}
		return nil, nil, out
	}
	var op *ast.OperationDefinition
	switch {
	case req.OperationName != "":
		op = doc.Operations.ForName(req.OperationName)
		if op == nil {
			return nil, nil, []gqlError{protocolError(codeValidationFailed, fmt.Sprintf("operation %s not found", req.OperationName), nil)}
		}
	case len(doc.Operations) == 1:
		op = doc.Operations[0]
	default:
		return nil, nil, []gqlError{protocolError(codeValidationFailed, "operation name is required with more than one operation", nil)}
	}
	if op.Operation == ast.Subscription {
		return nil, nil, []gqlError{protocolError(codeValidationFailed, "subscriptions are not supported", nil)}
	}
	vars, err := validator.VariableValues(s.schema, op, req.Variables)
	if err != nil {
		var ge *gqlerror.Error
		var path ast.Path
		if errors.As(err, &ge) {
			path = ge.Path
		}
		return nil, nil, []gqlError{protocolError(codeValidationFailed, gqlMessage(err), path)}
	}
	return op, vars, nil
}

func gqlMessage(err error) string {
	var ge *gqlerror.Error
	if errors.As(err, &ge) {
		if len(ge.Path) > 0 {
			return ge.Path.String() + ": " + ge.Message
		}
		return ge.Message
	}
	return err.Error()
}

func protocolError(code, msg string, path ast.Path) gqlError {
	e := gqlError{Message: msg, Extensions: map[string]any{"code": code}}
	for _, p := range path {
		e.Path = append(e.Path, p)
	}
	return e
}

// resolver resolves one root field from its arguments. It runs with the stand-in's lock held.
type resolver func(tenant string, args map[string]any) (any, error)

// execute runs the operation's root fields in order (a mutation's one after the other, as
// GraphQL requires) and answers like gqlgen: an error nulls its field, and a null in a non-null
// root field nulls the whole data.
func (s *StandIn) execute(tenant string, op *ast.OperationDefinition, vars map[string]any) response {
	data := map[string]any{}
	var errs []gqlError
	nullData := false
	for _, f := range collectFields(op.SelectionSet, vars) {
		if f.Name == "__typename" {
			data[f.Alias] = f.ObjectDefinition.Name
			continue
		}
		val, err := s.resolveRoot(tenant, f, vars)
		if err != nil {
			e := gqlError{Message: err.Error(), Path: []any{f.Alias}}
			var ae *apiError
			if errors.As(err, &ae) {
				e.Extensions = map[string]any{"error": ae.kind}
			}
			errs = append(errs, e)
			data[f.Alias] = nil
			if f.Definition.Type.NonNull {
				nullData = true
			}
			continue
		}
		data[f.Alias] = project(val, f, vars)
	}
	if nullData {
		return response{Data: nil, Errors: errs}
	}
	return response{Data: data, Errors: errs}
}

func (s *StandIn) resolveRoot(tenant string, f *ast.Field, vars map[string]any) (val any, err error) {
	defer func() {
		// ArgumentMap panics on a literal it cannot convert; validation should have caught it.
		if p := recover(); p != nil {
			val, err = nil, &apiError{kind: kindInternal, msg: fmt.Sprintf("resolving %s: %v", f.Name, p)}
		}
	}()
	r, ok := s.resolvers[f.Name]
	if !ok {
		return nil, &apiError{kind: kindInternal, msg: fmt.Sprintf("field %s has no resolver", f.Name)}
	}
	s.totals.Inc(f.Name)
	return r(tenant, f.ArgumentMap(vars))
}

// project keeps of v what the field's selection set asks for, under the requested names.
func project(v any, f *ast.Field, vars map[string]any) any {
	switch x := v.(type) {
	case object:
		out := map[string]any{}
		for _, sub := range collectFields(f.SelectionSet, vars) {
			if sub.Name == "__typename" {
				out[sub.Alias] = sub.ObjectDefinition.Name
				continue
			}
			val := x[sub.Name]
			if fn, ok := val.(fieldFunc); ok {
				val = fn(sub.ArgumentMap(vars))
			}
			out[sub.Alias] = project(val, sub, vars)
		}
		return out
	case []object:
		out := make([]any, 0, len(x))
		for _, o := range x {
			out = append(out, project(o, f, vars))
		}
		return out
	default:
		return v
	}
}

// collectFields flattens fragments and drops fields excluded by @skip or @include.
func collectFields(set ast.SelectionSet, vars map[string]any) []*ast.Field {
	var out []*ast.Field
	for _, sel := range set {
		switch x := sel.(type) {
		case *ast.Field:
			if included(x.Directives, vars) {
				out = append(out, x)
			}
		case *ast.InlineFragment:
			if included(x.Directives, vars) {
				out = append(out, collectFields(x.SelectionSet, vars)...)
			}
		case *ast.FragmentSpread:
			if included(x.Directives, vars) && x.Definition != nil {
				out = append(out, collectFields(x.Definition.SelectionSet, vars)...)
			}
		}
	}
	return out
}

func included(ds ast.DirectiveList, vars map[string]any) bool {
	if d := ds.ForName("skip"); d != nil && d.ArgumentMap(vars)["if"] == true {
		return false
	}
	if d := ds.ForName("include"); d != nil && d.ArgumentMap(vars)["if"] == false {
		return false
	}
	return true
}
