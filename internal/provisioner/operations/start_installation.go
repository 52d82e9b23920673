package operations

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"

	"github.com/sirupsen/logrus"
)

// StartInstallation applies the Kyma resource in the runtime (only with a Kyma config).
// Upgrades use it too: it applies whatever Kyma the operation works towards.
type StartInstallation struct {
	Deps
	StepName string
}

func (s StartInstallation) Name() string { return s.StepName }

func (s StartInstallation) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	c, err := s.cluster(ctx, op)
	if err != nil {
		return s.waitFor(op, fmt.Sprintf("opening the runtime: %v", err))
	}
	requested(&op, requestInstall)
	if err := c.ApplyKyma(ctx, kymaSpec(op.Data.Config.Kyma)); err != nil {
		if errors.Is(err, runtimeclient.ErrUnknownModule) {
			return op, 0, fmt.Errorf("installing Kyma: %w", err) // no retry makes the catalog have it
		}
		return s.waitFor(op, fmt.Sprintf("applying the Kyma resource: %v", err))
	}
	return op, 0, nil
}

// HasKyma is the condition of the installation steps.
func HasKyma(op Op) bool { return op.Data.Config.Kyma != nil }
