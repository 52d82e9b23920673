package directorstandin

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/gql"
)

// The stand-in answers GraphQL through internal/sandbox/gql, as gqlgen (which Compass uses) does.

type object = gql.Object

type fieldFunc = gql.FieldFunc

func notFound(format string, args ...any) error {
	return gql.Errorf(gql.KindNotFound, "Object not found [%s]", fmt.Sprintf(format, args...))
}

// invalidData names the input type and the offending field, in Compass's message format.
func invalidData(input, field, problem string) error {
	return gql.Errorf(gql.KindInvalidData, "Invalid data %s [%s=%s]", input, field, problem)
}

// internalError is how the Director answers an error that is not one of its own kinds: an
// InternalError with a fresh error ID and the reason.
func internalError(reason string) error {
	return gql.Errorf(gql.KindInternal, "Internal Server Error [errorID=%s, reason: %s]", uuid.NewString(), reason)
}

// sqlError is how the Director answers a failed SQL statement: an InternalError with a fresh
// error ID only.
func sqlError() error {
	return gql.Errorf(gql.KindInternal, "Internal Server Error [errorID=%s]", uuid.NewString())
}

// resolver resolves one root field from its arguments. It runs with the stand-in's lock held.
type resolver func(tenant string, args map[string]any) (any, error)

// execute runs the operation with the resolvers, counting every root field resolved.
func (s *StandIn) execute(tenant string, op *gql.Operation, resolvers map[string]resolver) gql.Response {
	return op.Execute(func(name string, args map[string]any) (any, error) {
		r, ok := resolvers[name]
		if !ok {
			return nil, gql.Errorf(gql.KindUnauthorized, "the caller may not resolve %s", name)
		}
		s.totals.Inc(name)
		return r(tenant, args)
	})
}
