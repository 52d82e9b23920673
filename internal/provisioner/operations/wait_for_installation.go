package operations

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/sirupsen/logrus"
)

// WaitForInstallation waits until the runtime's Kyma resource is Ready; Error fails.
type WaitForInstallation struct {
	Deps
	StepName string
}

func (s WaitForInstallation) Name() string { return s.StepName }

func (s WaitForInstallation) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	c, err := s.cluster(ctx, op)
	if err != nil {
		return s.waitFor(op, fmt.Sprintf("opening the runtime: %v", err))
	}
	state, msg, err := c.KymaState(ctx, kymaSpec(op.Data.Config.Kyma), requested(&op, requestInstall))
	if err != nil {
		return s.waitFor(op, fmt.Sprintf("reading the Kyma resource: %v", err))
	}
	switch state {
	case runtimeclient.KymaReady:
		return op, 0, nil
	case runtimeclient.KymaError:
		return op, 0, fmt.Errorf("kyma installation failed: %s", msg)
	}
	return s.waitFor(op, fmt.Sprintf("waiting for the Kyma installation (state %q)", state))
}
