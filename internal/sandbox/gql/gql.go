// Package gql executes GraphQL requests for the sandbox's GraphQL stand-ins (the Director and the
// Connector) as gqlgen, which Compass uses, answers them: gqlparser parses and validates a request
// and coerces its variables; the stand-in resolves each root field by name and gql projects the
// result onto the requested selection set (aliases, fragments, @skip/@include and __typename
// included). Resolver errors are answered with HTTP 200 and extensions.error, protocol errors with
// 422 and extensions.code.
package gql

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
)

// Object is a GraphQL object value: its fields by name. A field whose value is a FieldFunc is
// resolved with the arguments the request gives that field. An object that is a member of a
// union or an implementation of an interface names its type under TypeName, so that fragments
// on other types are left out and __typename answers the concrete type.
type Object map[string]any

// TypeName is the key of an Object's concrete type name.
const TypeName = "__typename"

// FieldFunc resolves a field from its arguments.
type FieldFunc func(args map[string]any) any

// Error kinds Compass puts in extensions.error.
const (
	KindNotFound       = "NotFound"
	KindInvalidData    = "InvalidData"
	KindTenantRequired = "TenantRequired"
	KindUnauthorized   = "Unauthorized"
	KindInternal       = "InternalError"
)

// Codes gqlgen puts in extensions.code of protocol errors.
const (
	CodeParseFailed      = "GRAPHQL_PARSE_FAILED"
	CodeValidationFailed = "GRAPHQL_VALIDATION_FAILED"
)

// APIError is a resolver failure, answered with HTTP 200 like any Compass resolver error.
type APIError struct{ Kind, Msg string }

func (e *APIError) Error() string { return e.Msg }

// Errorf returns an APIError of kind.
func Errorf(kind, format string, args ...any) error {
	return &APIError{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Error is one entry of a response's errors.
type Error struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path,omitempty"`
	Extensions map[string]any `json:"extensions,omitempty"`
}

// Response is a GraphQL response.
type Response struct {
	Data   any     `json:"data"`
	Errors []Error `json:"errors,omitempty"`
}

// Request is a GraphQL request.
type Request struct {
	Query         string         `json:"query"`
	OperationName string         `json:"operationName"`
	Variables     map[string]any `json:"variables"`
}

// Schema is a parsed schema.
type Schema struct {
	s *ast.Schema
	// Queries that parsed and validated, by text, as gqlgen's query cache keeps them: clients
	// send a few constant queries with variables, and parsing and validating each request was
	// most of a GraphQL stand-in's CPU. Bounded by queryCache; read-only once stored.
	docs *lru.Cache[string, *ast.QueryDocument]
}

// queryCache bounds the validated queries a Schema keeps.
const queryCache = 256

// MustLoad parses the schema; the schemas are constants of the stand-ins, so failing is a
// programming error.
func MustLoad(name, sdl string) *Schema {
	docs, err := lru.New[string, *ast.QueryDocument](queryCache)
	if err != nil {
		panic(fmt.Sprintf("gql: query cache: %v", err)) // only for a size below 1
	}
	return &Schema{s: gqlparser.MustLoadSchema(&ast.Source{Name: name, Input: sdl}), docs: docs}
}

// document returns the query parsed and validated, from the cache when it was seen before.
func (s *Schema) document(query string) (*ast.QueryDocument, []Error) {
	if doc, ok := s.docs.Get(query); ok {
		return doc, nil
	}
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil {
		return nil, []Error{protocolError(CodeParseFailed, message(err), nil)}
	}
	if errs := validator.ValidateWithRules(s.s, doc, nil); len(errs) > 0 {
		out := make([]Error, 0, len(errs))
		for _, e := range errs {
			out = append(out, protocolError(CodeValidationFailed, e.Message, e.Path))
		}
		return nil, out
	}
	s.docs.Add(query, doc)
	return doc, nil
}

// Operation is a validated operation with its coerced variables.
type Operation struct {
	op    *ast.OperationDefinition
	vars  map[string]any
	types map[string]*ast.Definition // the schema's, for fragments' type conditions
}

// Resolver resolves the root field name from its arguments.
type Resolver func(name string, args map[string]any) (any, error)

// Decode reads a POST request like gqlgen's POST transport and prepares its operation. When it
// cannot, it answers (400 for a body that is not a JSON request, 422 for a query that does not
// parse or validate or variables that do not fit) and returns false.
func (s *Schema) Decode(w http.ResponseWriter, r *http.Request) (*Operation, bool) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		sandbox.WriteJSON(w, http.StatusBadRequest, Response{Errors: []Error{{Message: "transport not supported"}}})
		return nil, false
	}
	var req Request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil {
		sandbox.WriteJSON(w, http.StatusBadRequest, Response{Errors: []Error{{Message: "json request body could not be decoded: " + err.Error()}}})
		return nil, false
	}
	op, errs := s.Prepare(req)
	if errs != nil {
		sandbox.WriteJSON(w, http.StatusUnprocessableEntity, Response{Errors: errs})
		return nil, false
	}
	return op, true
}

// Prepare parses and validates the request and coerces its variables. Its errors are protocol
// errors, which gqlgen answers with 422.
func (s *Schema) Prepare(req Request) (*Operation, []Error) {
	if strings.TrimSpace(req.Query) == "" {
		return nil, []Error{protocolError(CodeValidationFailed, "no operation provided", nil)}
	}
	doc, errs := s.document(req.Query)
	if errs != nil {
		return nil, errs
	}
	var op *ast.OperationDefinition
	switch {
	case req.OperationName != "":
		op = doc.Operations.ForName(req.OperationName)
		if op == nil {
			return nil, []Error{protocolError(CodeValidationFailed, fmt.Sprintf("operation %s not found", req.OperationName), nil)}
		}
	case len(doc.Operations) == 1:
		op = doc.Operations[0]
	default:
		return nil, []Error{protocolError(CodeValidationFailed, "operation name is required with more than one operation", nil)}
	}
	if op.Operation == ast.Subscription {
		return nil, []Error{protocolError(CodeValidationFailed, "subscriptions are not supported", nil)}
	}
	vars, err := validator.VariableValues(s.s, op, req.Variables)
	if err != nil {
		var ge *gqlerror.Error
		var path ast.Path
		if errors.As(err, &ge) {
			path = ge.Path
		}
		return nil, []Error{protocolError(CodeValidationFailed, message(err), path)}
	}
	return &Operation{op: op, vars: vars, types: s.s.Types}, nil
}

func message(err error) string {
	var ge *gqlerror.Error
	if errors.As(err, &ge) {
		if len(ge.Path) > 0 {
			return ge.Path.String() + ": " + ge.Message
		}
		return ge.Message
	}
	return err.Error()
}

func protocolError(code, msg string, path ast.Path) Error {
	e := Error{Message: msg, Extensions: map[string]any{"code": code}}
	for _, p := range path {
		e.Path = append(e.Path, p)
	}
	return e
}

// RootFields are the names of the operation's root fields, __typename excluded.
func (o *Operation) RootFields() []string {
	var out []string
	for _, f := range collectFields(o.op.SelectionSet, o.vars) {
		if f.Name != "__typename" {
			out = append(out, f.Name)
		}
	}
	return out
}

// Execute runs the operation's root fields in order (a mutation's one after the other, as
// GraphQL requires) and answers like gqlgen: an error nulls its field, and a null in a non-null
// root field nulls the whole data.
func (o *Operation) Execute(resolve Resolver) Response {
	data := map[string]any{}
	var errs []Error
	nullData := false
	for _, f := range collectFields(o.op.SelectionSet, o.vars) {
		if f.Name == "__typename" {
			data[f.Alias] = f.ObjectDefinition.Name
			continue
		}
		val, err := resolveRoot(resolve, f, o.vars)
		if err != nil {
			e := Error{Message: err.Error(), Path: []any{f.Alias}}
			var ae *APIError
			if errors.As(err, &ae) {
				e.Extensions = map[string]any{"error": ae.Kind}
			}
			errs = append(errs, e)
			data[f.Alias] = nil
			if f.Definition.Type.NonNull {
				nullData = true
			}
			continue
		}
		data[f.Alias] = o.project(val, f)
	}
	if nullData {
		return Response{Data: nil, Errors: errs}
	}
	return Response{Data: data, Errors: errs}
}

func resolveRoot(resolve Resolver, f *ast.Field, vars map[string]any) (val any, err error) {
	defer func() {
		// ArgumentMap panics on a literal it cannot convert; validation should have caught it.
		if p := recover(); p != nil {
			val, err = nil, &APIError{Kind: KindInternal, Msg: fmt.Sprintf("resolving %s: %v", f.Name, p)}
		}
	}()
	return resolve(f.Name, f.ArgumentMap(vars))
}

// project keeps of v what the field's selection set asks for, under the requested names.
func (o *Operation) project(v any, f *ast.Field) any {
	vars := o.vars
	switch x := v.(type) {
	case Object:
		out := map[string]any{}
		typeName, _ := x[TypeName].(string)
		for _, sub := range collectFieldsOf(f.SelectionSet, vars, o.types, typeName) {
			if sub.Name == "__typename" {
				if typeName != "" {
					out[sub.Alias] = typeName
				} else {
					out[sub.Alias] = sub.ObjectDefinition.Name
				}
				continue
			}
			val := x[sub.Name]
			if fn, ok := val.(FieldFunc); ok {
				val = fn(sub.ArgumentMap(vars))
			}
			out[sub.Alias] = o.project(val, sub)
		}
		return out
	case []Object:
		out := make([]any, 0, len(x))
		for _, e := range x {
			out = append(out, o.project(e, f))
		}
		return out
	default:
		return v
	}
}

// collectFields flattens fragments and drops fields excluded by @skip or @include.
func collectFields(set ast.SelectionSet, vars map[string]any) []*ast.Field {
	return collectFieldsOf(set, vars, nil, "")
}

// collectFieldsOf is collectFields for an object of the named concrete type: fragments on another
// object type are left out (with no name, every fragment applies).
func collectFieldsOf(set ast.SelectionSet, vars map[string]any, types map[string]*ast.Definition, typeName string) []*ast.Field {
	applies := func(cond string) bool {
		def := types[cond]
		return typeName == "" || cond == "" || def == nil || def.Kind != ast.Object || cond == typeName
	}
	var out []*ast.Field
	for _, sel := range set {
		switch x := sel.(type) {
		case *ast.Field:
			if included(x.Directives, vars) {
				out = append(out, x)
			}
		case *ast.InlineFragment:
			if included(x.Directives, vars) && applies(x.TypeCondition) {
				out = append(out, collectFieldsOf(x.SelectionSet, vars, types, typeName)...)
			}
		case *ast.FragmentSpread:
			if included(x.Directives, vars) && x.Definition != nil && applies(x.Definition.TypeCondition) {
				out = append(out, collectFieldsOf(x.Definition.SelectionSet, vars, types, typeName)...)
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
