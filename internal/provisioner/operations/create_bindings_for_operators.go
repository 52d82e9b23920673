package operations

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
)

// CreateBindingsForOperators gives the runtime's administrators cluster-admin.
type CreateBindingsForOperators struct{ Deps }

func (CreateBindingsForOperators) Name() string { return "Create_Bindings_For_Operators" }

func (s CreateBindingsForOperators) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	if len(op.Data.Config.Administrators) == 0 {
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
