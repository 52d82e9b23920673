package runtimeagent_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/connector"
	"github.com/kyma-project/kyma-environment-broker/internal/runtimeagent"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// hookedConnector is the sandbox's Connector (over TLS) with beforeSign run before each
// token-secured signing; an error it returns fails the signing without reaching the Connector
// (as a 503 in front of it would).
type hookedConnector struct {
	runtimeagent.Connector
	beforeSign func() error
	signs      atomic.Int32
}

func (h *hookedConnector) SignCSR(ctx context.Context, url, token string, csrPEM []byte) (connector.Certificates, error) {
	h.signs.Add(1)
	if h.beforeSign != nil {
		if err := h.beforeSign(); err != nil {
			return connector.Certificates{}, err
		}
	}
	return h.Connector.SignCSR(ctx, url, token, csrPEM)
}

// issued counts the certificates the Connector issued for the runtime.
func (e *env) issued() int {
	n := 0
	for _, c := range e.sb.Connector.Snapshot().Certificates {
		if c.RuntimeID == e.runtimeID {
			n++
		}
	}
	return n
}

// passUntil runs passes of a until the CompassConnection is in state want, at most n.
func (e *env) passUntil(a *runtimeagent.Agent, want runtimeagent.ConnectionState, n int) runtimeagent.CompassConnection {
	e.t.Helper()
	var c runtimeagent.CompassConnection
	for i := 0; i < n; i++ {
		a.Reconcile(e.ctx())
		if c, _ = e.connection(); c.Status.State == want {
			return c
		}
	}
	e.t.Fatalf("not %s after %d passes: %s %+v", want, n, c.Status.State, c.Status.ConnectionStatus)
	return c
}

// failedConnection leaves a CompassConnection in ConnectionFailed (an unusable token), then puts
// a valid token into the configuration Secret.
func (e *env) failedConnection(a *runtimeagent.Agent) {
	e.t.Helper()
	e.writeConfig("not-a-token", e.connectorURL)
	a.Reconcile(e.ctx())
	e.waitState(runtimeagent.ConnectionFailed)
	e.newToken()
}

// Defect 1: the CompassConnection is edited (a resyncNow patch) while the agent connects. The
// save of the new connection is retried against the fresh object, and the spent token is never
// used again: one certificate, Synchronized.
func TestEditDuringConnectionDoesNotStrand(t *testing.T) {
	e := newEnv(t)
	hook := &hookedConnector{Connector: e.compass}
	a := e.agentWith(hook)
	e.failedConnection(a)
	hook.beforeSign = func() error {
		u, err := e.dyn.Resource(runtimeagent.CompassConnectionGVR).Get(e.ctx(), e.cfg.ConnectionName, metav1.GetOptions{})
		require.NoError(t, err)
		u.Object["spec"].(map[string]any)["resyncNow"] = true
		_, err = e.dyn.Resource(runtimeagent.CompassConnectionGVR).Update(e.ctx(), u, metav1.UpdateOptions{})
		require.NoError(t, err)
		return nil
	}
	c := e.passUntil(a, runtimeagent.Synchronized, 5)
	assert.Equal(t, 1, e.issued(), "one token, one certificate")
	assert.Equal(t, int32(1), hook.signs.Load())
	assert.Empty(t, c.Status.ConnectionStatus.Error)
	for i := 0; i < 3; i++ {
		a.Reconcile(e.ctx())
	}
	c, _ = e.connection()
	assert.Equal(t, runtimeagent.Synchronized, c.Status.State)
}

// Defect 1: the CompassConnection is deleted (the seed's "Reconnect" tutorial) while the agent
// connects: the new connection is saved anew.
func TestDeletionDuringConnectionDoesNotStrand(t *testing.T) {
	e := newEnv(t)
	hook := &hookedConnector{Connector: e.compass}
	a := e.agentWith(hook)
	e.failedConnection(a)
	hook.beforeSign = func() error {
		return e.dyn.Resource(runtimeagent.CompassConnectionGVR).Delete(e.ctx(), e.cfg.ConnectionName, metav1.DeleteOptions{})
	}
	e.passUntil(a, runtimeagent.Synchronized, 5)
	assert.Equal(t, 1, e.issued())
}

// Defect 1: whatever happened to the CompassConnection, a valid stored certificate is the
// connection. With the resource gone and the token in the Secret spent, a new agent (a
// restart) resumes from the certificate without a token: no new certificate, the
// established time is the new resource's, Synchronized.
func TestValidCertificateIsTheConnection(t *testing.T) {
	e := newEnv(t)
	e.agent().Reconcile(e.ctx())
	e.waitState(runtimeagent.Synchronized)
	serial := e.certificateSerial()
	require.NoError(t, e.dyn.Resource(runtimeagent.CompassConnectionGVR).Delete(e.ctx(), e.cfg.ConnectionName, metav1.DeleteOptions{}))

	hook := &hookedConnector{Connector: e.compass}
	a := e.agentWith(hook)
	e.passUntil(a, runtimeagent.Synchronized, 3)
	assert.Equal(t, serial, e.certificateSerial())
	assert.Equal(t, int32(0), hook.signs.Load(), "the spent token was not used")
	assert.Equal(t, 1, e.issued())

	// A CompassConnection left in ConnectionFailed by anything is resumed the same way.
	u, err := e.dyn.Resource(runtimeagent.CompassConnectionGVR).Get(e.ctx(), e.cfg.ConnectionName, metav1.GetOptions{})
	require.NoError(t, err)
	u.Object["status"].(map[string]any)["connectionState"] = string(runtimeagent.ConnectionFailed)
	_, err = e.dyn.Resource(runtimeagent.CompassConnectionGVR).Update(e.ctx(), u, metav1.UpdateOptions{})
	require.NoError(t, err)
	e.passUntil(a, runtimeagent.Synchronized, 3)
	assert.Equal(t, serial, e.certificateSerial())
	assert.Equal(t, int32(0), hook.signs.Load())

	// A new token that fails does not strand it either: it resumes and says why.
	e.writeConfig("not-a-token-either", e.connectorURL)
	require.NoError(t, e.dyn.Resource(runtimeagent.CompassConnectionGVR).Delete(e.ctx(), e.cfg.ConnectionName, metav1.DeleteOptions{}))
	c := e.passUntil(a, runtimeagent.Synchronized, 3)
	assert.Contains(t, c.Status.ConnectionStatus.Error, "resumed with the stored certificate")
	assert.Equal(t, serial, e.certificateSerial())
}

// Defect 2: the signing fails (temporarily) more often than one pass tries it, and the agent
// restarts in between: the next token the Connector handed out was kept, the signing is tried
// again with it, and the connection is established from the one token of the Secret.
func TestFailedSigningKeepsTheNextToken(t *testing.T) {
	e := newEnv(t)
	var failures atomic.Int32
	failures.Store(4)
	flaky := func() error {
		if failures.Add(-1) >= 0 {
			return &connector.Error{Op: "signing the CSR", Temporary: true, Err: errors.New("503 Service Unavailable")}
		}
		return nil
	}
	hook := &hookedConnector{Connector: e.compass, beforeSign: flaky}
	a := e.agentWith(hook)
	a.Reconcile(e.ctx())
	c, _ := e.connection()
	require.Equal(t, runtimeagent.ConnectionFailed, c.Status.State)
	assert.NotContains(t, c.Status.ConnectionStatus.Error, "a new one-time token is needed", "a temporary failure")
	assert.NotNil(t, c.Status.ConnectionStatus.LastSync, "lastSync says when the attempt was made")

	restarted := e.agentWith(&hookedConnector{Connector: e.compass, beforeSign: flaky})
	e.passUntil(restarted, runtimeagent.Synchronized, 5)
	assert.Equal(t, 1, e.issued())
}

// Defect 2 with the sandbox's fault injection: 70% of the Connector's requests fail with 500 or
// 503. Every runtime connects in the end from its one token.
func TestConnectsThroughConnectorErrors(t *testing.T) {
	for i := 0; i < 3; i++ {
		e := newEnv(t)
		require.NoError(t, e.sb.Sandbox.SetFaults("connector", sandbox.Faults{ErrorRate: 0.7}))
		a := e.agent()
		deadline := time.Now().Add(time.Minute)
		for {
			a.Reconcile(e.ctx())
			c, _ := e.connection()
			if c.Status.State == runtimeagent.Synchronized {
				break
			}
			if c.Status.ConnectionStatus != nil {
				require.NotContains(t, c.Status.ConnectionStatus.Error, "a new one-time token is needed", "run %d stranded", i)
			}
			require.True(t, time.Now().Before(deadline), "run %d: not connected within a minute: %+v", i, c.Status)
		}
		assert.Equal(t, 1, e.issued(), "run %d", i)
	}
}
