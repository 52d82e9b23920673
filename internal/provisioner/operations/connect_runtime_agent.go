package operations

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/compass"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// ConnectRuntimeAgent gets a one-time token from the Director, writes the agent's
// configuration Secret (CONNECTOR_URL, RUNTIME_ID, TENANT, TOKEN) into the runtime and sets the
// runtime's status condition in the Director to CONNECTED.
//
// The token is kept in the operation's encrypted secrets with its issue time, so a run after a
// failure reuses it while it is young; a new token revokes every earlier one of the runtime, so
// however often this runs (crashes, lost answers) one valid token exists.
type ConnectRuntimeAgent struct{ Deps }

func (ConnectRuntimeAgent) Name() string { return "Connect_Runtime_Agent" }

// Where the token is kept in the operation's secrets, and how long it is reused: well inside the
// Director's 5 minutes, leaving the agent time to use it.
const (
	agentTokenKey       = "agentToken"
	agentConnectorKey   = "agentTokenConnectorURL"
	agentTokenIssuedKey = "agentTokenIssuedAt"
	agentTokenReuse     = 4 * time.Minute
)

func (s ConnectRuntimeAgent) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	c, err := s.cluster(ctx, op)
	if err != nil {
		return s.waitFor(op, fmt.Sprintf("opening the runtime: %v", err))
	}
	token, ok := keptToken(op)
	if !ok {
		if token, err = s.Director.RequestOneTimeToken(ctx, op.Data.Tenant, op.Data.CompassRuntimeID); err != nil {
			return s.directorFailed(op, "requesting a one-time token", err)
		}
		keepToken(&op, token)
	}
	connector := token.ConnectorURL
	if connector == "" {
		connector = s.ConnectorURL
	}
	cfg := runtimeclient.AgentConfig{ConnectorURL: connector, RuntimeID: op.Data.CompassRuntimeID, Tenant: op.Data.Tenant, Token: token.Token}
	if err := c.WriteAgentConfig(ctx, cfg); err != nil {
		return s.waitFor(op, fmt.Sprintf("writing the agent configuration: %v", err))
	}
	// A failure runs the step again with the kept token; writing the configuration again is harmless.
	if err := s.Director.SetRuntimeStatusCondition(ctx, op.Data.Tenant, op.Data.CompassRuntimeID, compass.ConditionConnected); err != nil {
		return s.directorFailed(op, "setting the runtime's status condition", err)
	}
	// The agent has its token; the operation need not keep it.
	for _, k := range []string{agentTokenKey, agentConnectorKey, agentTokenIssuedKey} {
		delete(op.Secrets, k)
	}
	// The wait for the connection starts now, also when this step runs again.
	requested(&op, requestAgent)
	op.Data.RequestedAt[requestAgent] = op.Now().UTC()
	op.LastError = ""
	return op, 0, nil
}

// keptToken is the token an earlier run of the step kept, if it is young enough to hand out.
func keptToken(op Op) (compass.Token, bool) {
	tok := op.Secrets[agentTokenKey]
	issued, err := time.Parse(time.RFC3339Nano, op.Secrets[agentTokenIssuedKey])
	if tok == "" || err != nil || op.Now().Sub(issued) >= agentTokenReuse {
		return compass.Token{}, false
	}
	return compass.Token{Token: tok, ConnectorURL: op.Secrets[agentConnectorKey]}, true
}

func keepToken(op *Op, tok compass.Token) {
	if op.Secrets == nil {
		op.Secrets = storage.Secrets{}
	}
	op.Secrets[agentTokenKey] = tok.Token
	op.Secrets[agentConnectorKey] = tok.ConnectorURL
	op.Secrets[agentTokenIssuedKey] = op.Now().UTC().Format(time.RFC3339Nano)
}
