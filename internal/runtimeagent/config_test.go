package runtimeagent

import (
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/logging"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigDefaults(t *testing.T) {
	cfg, err := LoadConfig()
	require.NoError(t, err)
	// The provisioner writes the Secret where the agent reads it by default.
	assert.Equal(t, runtimeclient.DefaultAgentConfigSecret, cfg.AgentConfigurationSecret)
	assert.Equal(t, "compass-system/compass-agent-configuration", cfg.AgentConfigurationSecret)
	assert.Equal(t, runtimeclient.CompassConnectionName, cfg.ConnectionName)
	assert.Equal(t, 20*time.Second, cfg.ControllerSyncPeriod)
	assert.Equal(t, 10*time.Second, cfg.MinimalCompassSyncTime)
	assert.Equal(t, 0.3, cfg.CertValidityRenewalThreshold)
	assert.Equal(t, 4096, cfg.CertKeyBits)
}

func TestConfigRefusesBadSettings(t *testing.T) {
	t.Setenv("APP_CLUSTER_CERTIFICATES_SECRET", "no-namespace")
	_, err := LoadConfig()
	assert.ErrorContains(t, err, "APP_CLUSTER_CERTIFICATES_SECRET")

	t.Setenv("APP_CLUSTER_CERTIFICATES_SECRET", "ns/name")
	t.Setenv("APP_CERT_VALIDITY_RENEWAL_THRESHOLD", "1.5")
	_, err = LoadConfig()
	assert.ErrorContains(t, err, "APP_CERT_VALIDITY_RENEWAL_THRESHOLD")
}

func TestBackoffIsBounded(t *testing.T) {
	a := &Agent{cfg: Config{ReconnectBackoffMin: time.Second, ReconnectBackoffMax: 10 * time.Second}}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	seen := map[time.Duration]bool{}
	for round := 0; round < 20; round++ {
		for a.failures = 1; a.failures <= 6; a.failures++ {
			got, ceiling := a.backoff(), want[a.failures-1]
			assert.True(t, got <= ceiling && got >= ceiling*4/5, "after %d failures: %v not in [%v, %v]", a.failures, got, ceiling*4/5, ceiling)
			seen[got] = true
		}
	}
	assert.Greater(t, len(seen), 6, "jittered")
}

// The start-up log names the configuration Secret: the redaction of secret values keeps it.
func TestStartupFieldsAreNotRedacted(t *testing.T) {
	cfg := Config{AgentConfigurationSecret: "compass-system/compass-agent-configuration", ClusterCertificatesSecret: "kyma-system/certs",
		CACertificatesSecret: "istio-system/ca", ConnectionName: "compass-connection", LeaderElectionNamespace: "compass-system", LeaderElectionName: "agent"}
	e := logrus.NewEntry(logrus.New()).WithFields(StartupFields(cfg))
	require.NoError(t, logging.Redactor{}.Fire(e))
	assert.Equal(t, "compass-system/compass-agent-configuration", e.Data["configurationFrom"])
	for k, v := range e.Data {
		assert.NotEqual(t, logging.Redacted, v, k)
	}
}
