package operations

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/sirupsen/logrus"
)

// WaitForAgentToConnect waits until the runtime's CompassConnection is Synchronized.
type WaitForAgentToConnect struct{ Deps }

func (WaitForAgentToConnect) Name() string { return "Wait_For_Agent_To_Connect" }

func (s WaitForAgentToConnect) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	c, err := s.cluster(ctx, op)
	if err != nil {
		return s.waitFor(op, fmt.Sprintf("opening the runtime: %v", err))
	}
	state, err := c.ConnectionState(ctx, requested(&op, requestAgent))
	if err != nil {
		return s.waitFor(op, fmt.Sprintf("reading the CompassConnection: %v", err))
	}
	if state == runtimeclient.ConnectionSynchronized {
		return op, 0, nil
	}
	return s.waitFor(op, fmt.Sprintf("waiting for the Runtime Agent to connect (state %q)", state))
}
