package runtimeagent_test

import (
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/runtimeagent"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// metricValue is the value of the metric name (of the series with the label value, when given).
func metricValue(t testing.TB, reg *prometheus.Registry, name string, label ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if len(label) > 0 && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() != label[0]) {
				continue
			}
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	t.Fatalf("no metric %s %v", name, label)
	return 0
}

// events are the Events recorded on the CompassConnection, by reason.
func (e *env) events() map[string][]corev1.Event {
	e.t.Helper()
	list, err := e.core.CoreV1().Events(metav1.NamespaceDefault).List(e.ctx(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", e.cfg.ConnectionName).String()})
	require.NoError(e.t, err)
	out := map[string][]corev1.Event{}
	for _, ev := range list.Items {
		out[ev.Reason] = append(out[ev.Reason], ev)
	}
	return out
}

// waitEvent waits until an Event of reason is recorded on the CompassConnection.
func (e *env) waitEvent(reason string) corev1.Event {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if evs := e.events()[reason]; len(evs) > 0 {
			return evs[0]
		}
		require.True(e.t, time.Now().Before(deadline), "no %s Event: %v", reason, e.events())
		time.Sleep(50 * time.Millisecond)
	}
}

// revokedAndDue connects an agent with a one-minute certificate, revokes the certificate and
// waits until it is due for renewal (APP_CERT_VALIDITY_RENEWAL_THRESHOLD 0.99).
func (e *env) revokedAndDue() *runtimeagent.Agent {
	e.t.Helper()
	sandboxtest.SetCertificateLifetime(e.t, e.sb.URL, time.Minute)
	e.cfg.CertValidityRenewalThreshold = 0.99
	a := e.agent()
	a.Reconcile(e.ctx())
	e.waitState(runtimeagent.Synchronized)
	require.NoError(e.t, a.Revoke(e.ctx()))
	e.waitFor("the renewal due", func(c runtimeagent.CompassConnection) bool {
		cs := c.Status.ConnectionStatus.CertificateStatus
		return time.Until(cs.NotAfter.Time) < cs.NotAfter.Sub(cs.NotBefore.Time)*99/100
	})
	return a
}

// Defect 3: a renewal that fails (a revoked certificate) past the threshold backs off, doubling
// with jitter up to the cap, instead of passes back to back; a Warning Event and a metric say
// the certificate will expire without renewal.
func TestFailingRenewalBacksOff(t *testing.T) {
	e := newEnv(t)
	a := e.revokedAndDue()

	lo, hi := e.cfg.ReconnectBackoffMin, e.cfg.ReconnectBackoffMax
	var waits []time.Duration
	for i := 0; i < 7; i++ {
		waits = append(waits, a.Reconcile(e.ctx()))
	}
	t.Logf("waits after failed renewals: %v", waits)
	c, _ := e.connection()
	assert.Equal(t, runtimeagent.ConnectionMaintenanceFailed, c.Status.State)
	for i, w := range waits {
		want := min(lo<<i, hi)
		assert.True(t, w >= want*4/5 && w <= want, "wait %d: %v not in [%v, %v]", i, w, want*4/5, want)
	}
	reg := a.Metrics().Registry
	assert.Equal(t, 1.0, metricValue(t, reg, "compass_runtime_agent_certificate_expiring_without_renewal"))
	assert.Equal(t, 7.0, metricValue(t, reg, "compass_runtime_agent_certificate_maintenance_failures_total"))
	assert.Equal(t, 1.0, metricValue(t, reg, "compass_runtime_agent_connection_state", string(runtimeagent.ConnectionMaintenanceFailed)))
	ev := e.waitEvent(runtimeagent.ReasonExpiresWithoutRenewal)
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	assert.Contains(t, ev.Message, "renewing it fails")
	e.waitEvent(string(runtimeagent.ConnectionMaintenanceFailed))
}

// Defect 3 with the controller: against a revoked certificate due for renewal, the Connector is
// asked a few times in three seconds (the backoff's cap here is 500 ms), not hundreds.
func TestFailingRenewalPacesTheConnector(t *testing.T) {
	e := newEnv(t)
	e.revokedAndDue()
	before := e.sb.Connector.Snapshot().Calls["refused.certificate"]
	stop := e.start()
	e.waitState(runtimeagent.ConnectionMaintenanceFailed)
	time.Sleep(3 * time.Second) // a measurement window: the pace is what is measured
	stop()
	calls := e.sb.Connector.Snapshot().Calls["refused.certificate"] - before
	t.Logf("refused calls in about 3 s: %d", calls)
	assert.Less(t, calls, 15)
}
