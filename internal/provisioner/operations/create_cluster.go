package operations

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/sirupsen/logrus"
)

// CreateCluster asks the runtime's backend for its cluster (idempotent per runtime).
type CreateCluster struct{ Deps }

func (CreateCluster) Name() string { return "Create_Cluster" }

func (s CreateCluster) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	b, err := s.backend(op)
	if err != nil {
		return op, 0, err
	}
	if err := b.Create(ctx, spec(&op, requestCreate)); err != nil {
		if errors.Is(err, infrastructure.ErrNoCapacity) {
			return op, 0, fmt.Errorf("creating cluster: %w", err)
		}
		return s.waitFor(op, fmt.Sprintf("creating cluster: %v", err))
	}
	return op, 0, nil
}
