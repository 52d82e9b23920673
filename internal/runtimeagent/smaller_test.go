package runtimeagent_test

import (
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/runtimeagent"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Defect 5: the CRD requires spec.
func TestCompassConnectionRequiresSpec(t *testing.T) {
	e := newEnv(t)
	_, err := e.dyn.Resource(runtimeagent.CompassConnectionGVR).Create(e.ctx(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "compass.kyma-project.io/v1alpha1", "kind": "CompassConnection", "metadata": map[string]any{"name": e.ns + "-nospec"},
	}}, metav1.CreateOptions{})
	require.Error(t, err)
	assert.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), "spec")
}

// Defect 5: a new token written to the configuration Secret is tried at once (the Secret is
// watched), not after the backoff, which here is 20 seconds and more.
func TestNewTokenIsTriedAtOnce(t *testing.T) {
	e := newEnv(t)
	e.cfg.ReconnectBackoffMin, e.cfg.ReconnectBackoffMax = 20*time.Second, 2*time.Minute
	e.writeConfig("not-a-token", e.connectorURL)
	e.start()
	c := e.waitState(runtimeagent.ConnectionFailed)
	assert.NotNil(t, c.Status.ConnectionStatus.LastSync, "lastSync is set by a failed attempt")
	start := time.Now()
	e.newToken()
	e.waitState(runtimeagent.Synchronized)
	took := time.Since(start)
	t.Logf("from the new token to Synchronized: %v", took)
	assert.Less(t, took, 10*time.Second)
}

// Defect 5: a RUNTIME_ID in the configuration Secret that is not the certificate's CN: the agent
// acts as the certificate's runtime (the Director authorises by it) and says so in the status
// and an Event.
func TestRuntimeIDIsTheCertificates(t *testing.T) {
	e := newEnv(t)
	s, err := e.core.CoreV1().Secrets(e.ns).Get(e.ctx(), "compass-agent-configuration", metav1.GetOptions{})
	require.NoError(t, err)
	s.Data["RUNTIME_ID"] = []byte("not-the-runtime")
	_, err = e.core.CoreV1().Secrets(e.ns).Update(e.ctx(), s, metav1.UpdateOptions{})
	require.NoError(t, err)
	app := e.registerApp(e.prefix + "-mine")
	a := e.agent()
	a.Reconcile(e.ctx())
	c := e.waitState(runtimeagent.Synchronized)
	assert.Contains(t, c.Status.ConnectionStatus.Error, "acts as runtime "+e.runtimeID)
	assert.Contains(t, e.clusterApps(), app.Name)
	ev := e.waitEvent(runtimeagent.ReasonIdentity)
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	a.Reconcile(e.ctx())
	c, _ = e.connection()
	assert.Equal(t, runtimeagent.Synchronized, c.Status.State)
	assert.Contains(t, c.Status.ConnectionStatus.Error, "not the certificate's identity", "said in every pass")
}
