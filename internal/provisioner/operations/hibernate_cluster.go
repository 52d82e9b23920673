package operations

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
)

// HibernateCluster asks the backend to hibernate the cluster.
type HibernateCluster struct{ Deps }

func (HibernateCluster) Name() string { return "Hibernate_Cluster" }

func (s HibernateCluster) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	b, err := s.backend(op)
	if err != nil {
		return op, 0, err
	}
	if err := b.Hibernate(ctx, spec(&op, requestHibernate)); err != nil {
		return op, 0, fmt.Errorf("hibernating cluster: %w", err)
	}
	return op, 0, nil
}
