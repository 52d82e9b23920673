package operations

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
)

// CreateBindingsForOperators gives the runtime's administrators cluster-admin, or, for a
// runtime that is a namespace of a shared host (static, kubernetes), the rights on that
// namespace only: the backend binds them there.
type CreateBindingsForOperators struct{ Deps }

func (CreateBindingsForOperators) Name() string { return "Create_Bindings_For_Operators" }

func (s CreateBindingsForOperators) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	if len(op.Data.Config.Administrators) == 0 {
		return op, 0, nil
	}
	b, err := s.backend(op)
	if err != nil {
		return op, 0, err
	}
	if binder, ok := b.(infrastructure.AdministratorBinder); ok {
		if err := binder.BindAdministrators(ctx, spec(&op, requestCreate), op.Data.Config.Administrators); err != nil {
			return s.waitFor(op, fmt.Sprintf("binding the administrators to the runtime's namespace: %v", err))
		}
		return op, 0, nil
	}
	c, err := s.cluster(ctx, op)
	if err != nil {
		return s.waitFor(op, fmt.Sprintf("opening the runtime: %v", err))
	}
	if err := c.ApplyOperatorBindings(ctx, op.Data.Config.Administrators); err != nil {
		return s.waitFor(op, fmt.Sprintf("creating bindings for operators: %v", err))
	}
	return op, 0, nil
}
