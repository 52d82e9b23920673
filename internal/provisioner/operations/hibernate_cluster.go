package operations

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/sirupsen/logrus"
)

// HibernateCluster asks the backend to hibernate the cluster. A backend that cannot hibernate
// fails the operation; other errors (an API call that failed) are retried.
type HibernateCluster struct{ Deps }

func (HibernateCluster) Name() string { return "Hibernate_Cluster" }

func (s HibernateCluster) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	b, err := s.backend(op)
	if err != nil {
		return op, 0, err
	}
	if err := b.Hibernate(ctx, spec(&op, requestHibernate)); err != nil {
		if errors.Is(err, infrastructure.ErrNotSupported) {
			return op, 0, fmt.Errorf("hibernating cluster: %w", err)
		}
		return s.waitFor(op, fmt.Sprintf("hibernating cluster: %v", err))
	}
	return op, 0, nil
}
