package runtimeagent_test

import (
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/runtimeagent"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// directorRuntime is the runtime as the Director answers it to the provisioner.
func (e *env) directorRuntime() (condition string, labels map[string]any) {
	e.t.Helper()
	var out struct {
		R struct {
			Labels map[string]any `json:"labels"`
			Status struct {
				Condition string `json:"condition"`
			} `json:"status"`
		} `json:"r"`
	}
	sandboxtest.DirectorGraphQL(e.t, e.sb.URL, e.tenant, `query($id: ID!) { r: runtime(id: $id) { labels status { condition } } }`,
		map[string]any{"id": e.runtimeID}, &out)
	return out.R.Status.Condition, out.R.Labels
}

// reconcileUntil runs passes until the CompassConnection is in state want.
func (e *env) reconcileUntil(a *runtimeagent.Agent, want runtimeagent.ConnectionState) runtimeagent.CompassConnection {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		a.Reconcile(e.ctx())
		if c, ok := e.connection(); ok && c.Status.State == want {
			return c
		}
		require.True(e.t, time.Now().Before(deadline), "no %s", want)
	}
}

// Issue 35: the agent reports its state in the Director's status condition (CONNECTED once
// synchronised, FAILED when the Connector refuses its certificate), keeping the runtime's
// labels; a revoked certificate makes the status, the metric and /readyz say a new token is
// needed, still so after the certificate really expired (ConnectionFailed), until a new token
// restores the connection.
func TestRevokedCertificateExpiresAndNeedsANewToken(t *testing.T) {
	e := newEnv(t)
	sandboxtest.SetCertificateLifetime(t, e.sb.URL, 8*time.Second)
	e.cfg.CertValidityRenewalThreshold = 0.05 // no renewal before the certificate is revoked
	a := e.agent()
	ctrl, err := runtimeagent.NewController(e.cfg, kubetest.RESTConfig(t), e.compass, e.log)
	require.NoError(t, err)
	reg := a.Metrics().Registry

	e.reconcileUntil(a, runtimeagent.Synchronized)
	cond, labels := e.directorRuntime()
	assert.Equal(t, runtimeagent.ConditionConnected, cond)
	assert.Equal(t, e.cfg.RuntimeConsoleURL, labels[runtimeagent.LabelConsoleURL])
	require.NoError(t, ctrl.Ready(e.ctx()))

	require.NoError(t, a.Revoke(e.ctx()))
	c := e.reconcileUntil(a, runtimeagent.ConnectionMaintenanceFailed)
	assert.Contains(t, c.Status.ConnectionStatus.Error, runtimeagent.NewTokenNeeded)
	assert.Contains(t, c.Status.ConnectionStatus.Error, "reconnectRuntimeAgent")
	assert.Equal(t, 1.0, metricValue(t, reg, "compass_runtime_agent_new_token_needed"))
	cond, labels = e.directorRuntime()
	assert.Equal(t, runtimeagent.ConditionFailed, cond, "the Director hears FAILED while the certificate still reaches it")
	assert.Equal(t, e.cfg.RuntimeConsoleURL, labels[runtimeagent.LabelConsoleURL], "the condition is set without losing labels")
	assert.ErrorContains(t, ctrl.Ready(e.ctx()), runtimeagent.NewTokenNeeded)

	// The certificate really expires: the agent falls back to the Secret's token, spent.
	notAfter := c.Status.ConnectionStatus.CertificateStatus.NotAfter.Time
	for time.Now().Before(notAfter.Add(time.Second)) {
		time.Sleep(100 * time.Millisecond) // waiting for the certificate's end, which is the point
	}
	c = e.reconcileUntil(a, runtimeagent.ConnectionFailed)
	assert.Contains(t, c.Status.ConnectionStatus.Error, runtimeagent.NewTokenNeeded)
	assert.Equal(t, 1.0, metricValue(t, reg, "compass_runtime_agent_new_token_needed"))
	assert.ErrorContains(t, ctrl.Ready(e.ctx()), "ConnectionFailed")
	cond, _ = e.directorRuntime()
	assert.Equal(t, runtimeagent.ConditionFailed, cond, "the last condition reported stays")

	// The one remedy: a new token (what reconnectRuntimeAgent writes).
	sandboxtest.SetCertificateLifetime(t, e.sb.URL, time.Hour)
	e.newToken()
	c = e.reconcileUntil(a, runtimeagent.Synchronized)
	assert.NotContains(t, c.Status.ConnectionStatus.Error, runtimeagent.NewTokenNeeded)
	assert.Equal(t, 0.0, metricValue(t, reg, "compass_runtime_agent_new_token_needed"))
	require.NoError(t, ctrl.Ready(e.ctx()))
	cond, _ = e.directorRuntime()
	assert.Equal(t, runtimeagent.ConditionConnected, cond)
	assert.GreaterOrEqual(t, metricValue(t, reg, "compass_runtime_agent_director_condition_reports_total", runtimeagent.ConditionFailed), 1.0)
}

// Issue 35: after a revocation, a new token in the configuration Secret is used at once, while
// the revoked certificate is still valid, not only after it expired.
func TestNewTokenReplacesARevokedCertificateAtOnce(t *testing.T) {
	e := newEnv(t)
	a := e.agent()
	e.reconcileUntil(a, runtimeagent.Synchronized)
	revoked := e.certificateSerial()
	require.NoError(t, a.Revoke(e.ctx()))
	e.reconcileUntil(a, runtimeagent.ConnectionMaintenanceFailed)

	// Passes without a new token keep the revoked certificate.
	a.Reconcile(e.ctx())
	assert.Equal(t, revoked, e.certificateSerial())

	e.newToken()
	c := e.reconcileUntil(a, runtimeagent.Synchronized)
	assert.NotEqual(t, revoked, e.certificateSerial())
	assert.Empty(t, c.Status.ConnectionStatus.Error)
	assert.Equal(t, 0.0, metricValue(t, a.Metrics().Registry, "compass_runtime_agent_new_token_needed"))
	cond, _ := e.directorRuntime()
	assert.Equal(t, runtimeagent.ConditionConnected, cond)
}

// A runtime's certificate reads and sets only its own runtime's status condition.
func TestRuntimeCertificateSetsOnlyItsOwnCondition(t *testing.T) {
	e := newEnv(t)
	a := e.agent()
	c := e.reconcileUntil(a, runtimeagent.Synchronized)
	other, _, _ := sandboxtest.OneTimeToken(t, e.sb.URL, e.tenant, "other-"+e.ns)
	err := e.compass.SetRuntimeStatusCondition(e.ctx(), c.Spec.ManagementInfo.DirectorURL, e.tenant, other, runtimeagent.ConditionFailed, e.credentials())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not allow access")
}
