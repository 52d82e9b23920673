package operations

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/director"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/sirupsen/logrus"
)

// ConnectRuntimeAgent gets a one-time token from the Director, writes the agent's
// configuration Secret (CONNECTOR_URL, RUNTIME_ID, TENANT, TOKEN) into the runtime and sets the
// runtime's status condition in the Director to CONNECTED.
type ConnectRuntimeAgent struct{ Deps }

func (ConnectRuntimeAgent) Name() string { return "Connect_Runtime_Agent" }

func (s ConnectRuntimeAgent) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	c, err := s.cluster(ctx, op)
	if err != nil {
		return s.waitFor(op, fmt.Sprintf("opening the runtime: %v", err))
	}
	token, err := s.Director.RequestOneTimeToken(ctx, op.Data.Tenant, op.Data.CompassRuntimeID)
	if err != nil {
		return s.waitFor(op, fmt.Sprintf("requesting a one-time token: %v", err))
	}
	connector := token.ConnectorURL
	if connector == "" {
		connector = s.ConnectorURL
	}
	cfg := runtimeclient.AgentConfig{ConnectorURL: connector, RuntimeID: op.Data.CompassRuntimeID, Tenant: op.Data.Tenant, Token: token.Token}
	if err := c.WriteAgentConfig(ctx, cfg); err != nil {
		return s.waitFor(op, fmt.Sprintf("writing the agent configuration: %v", err))
	}
	// A failure runs the step again with a new token; writing the configuration again is harmless.
	if err := s.Director.SetRuntimeStatusCondition(ctx, op.Data.Tenant, op.Data.CompassRuntimeID, director.ConditionConnected); err != nil {
		return s.waitFor(op, fmt.Sprintf("setting the runtime's status condition in the Director: %v", err))
	}
	// The wait for the connection starts now, also when this step runs again.
	requested(&op, requestAgent)
	op.Data.RequestedAt[requestAgent] = op.Now().UTC()
	return op, 0, nil
}
