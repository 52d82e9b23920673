package runtimeagent_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/runtimeagent"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// /readyz follows the connection (not ready in ConnectionFailed, ready once connected),
// /healthz answers regardless, /metrics has the agent's metrics, and every state change is an
// Event on the CompassConnection.
func TestReadinessMetricsAndEvents(t *testing.T) {
	e := newEnv(t)
	e.writeConfig("not-a-token", e.connectorURL)
	ctrl, err := runtimeagent.NewController(e.cfg, kubetest.RESTConfig(t), e.compass, e.log)
	require.NoError(t, err)
	srv := httptest.NewServer(ctrl.Handler())
	t.Cleanup(srv.Close)
	testenv.Background(t, ctrl.Run)

	e.waitState(runtimeagent.ConnectionFailed)
	code, body := get(t, srv.URL+"/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "ConnectionFailed")
	code, _ = get(t, srv.URL+"/healthz")
	assert.Equal(t, http.StatusOK, code)
	ev := e.waitEvent(string(runtimeagent.ConnectionFailed))
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	_, metrics := get(t, srv.URL+"/metrics")
	assert.Contains(t, metrics, `compass_runtime_agent_connection_state{state="ConnectionFailed"} 1`)
	assert.Contains(t, metrics, `compass_runtime_agent_new_token_needed 1`)

	e.newToken()
	e.waitState(runtimeagent.Synchronized)
	code, _ = get(t, srv.URL+"/readyz")
	assert.Equal(t, http.StatusOK, code)
	for _, reason := range []runtimeagent.ConnectionState{runtimeagent.Connected, runtimeagent.Synchronized} {
		ev := e.waitEvent(string(reason))
		assert.Equal(t, corev1.EventTypeNormal, ev.Type, reason)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, metrics = get(t, srv.URL+"/metrics")
		if strings.Contains(metrics, `compass_runtime_agent_connection_state{state="Synchronized"} 1`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	assert.Contains(t, metrics, `compass_runtime_agent_connection_state{state="Synchronized"} 1`)
	assert.Contains(t, metrics, `compass_runtime_agent_new_token_needed 0`)
	assert.Contains(t, metrics, "compass_runtime_agent_certificate_not_after_seconds ")
	assert.Contains(t, metrics, "compass_runtime_agent_sync_duration_seconds_count")
	assert.Contains(t, metrics, "compass_runtime_agent_applications_applied 0")
}
