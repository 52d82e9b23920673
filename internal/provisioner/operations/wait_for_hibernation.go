package operations

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/sirupsen/logrus"
)

// WaitForHibernation waits until the cluster reports it is hibernated.
type WaitForHibernation struct{ Deps }

func (WaitForHibernation) Name() string { return "Wait_For_Hibernation" }

func (s WaitForHibernation) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	b, err := s.backend(op)
	if err != nil {
		return op, 0, err
	}
	st, err := b.Status(ctx, spec(&op, requestHibernate))
	if err != nil {
		return s.waitFor(op, fmt.Sprintf("reading cluster status: %v", err))
	}
	if st.Phase == infrastructure.PhaseFailed {
		return op, 0, fmt.Errorf("hibernation failed: %s", st.Reason)
	}
	if !st.Hibernated {
		return s.waitFor(op, "waiting for the cluster to hibernate")
	}
	return op, 0, nil
}
