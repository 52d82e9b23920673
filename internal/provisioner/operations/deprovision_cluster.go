package operations

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
)

// DeprovisionCluster asks the backend to delete the runtime's cluster.
type DeprovisionCluster struct{ Deps }

func (DeprovisionCluster) Name() string { return "Deprovision_Cluster" }

func (s DeprovisionCluster) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	b, err := s.backend(op)
	if err != nil {
		return op, 0, err
	}
	if err := b.Delete(ctx, spec(&op, requestDelete)); err != nil {
		return s.waitFor(op, fmt.Sprintf("deleting cluster: %v", err))
	}
	return op, 0, nil
}
