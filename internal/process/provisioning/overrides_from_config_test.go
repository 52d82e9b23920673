package provisioning_test

import (
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/resources"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testOverrides = `
components:
  _global:
    - key: global.domainName
      value: kyma.example
  monitoring:
    - key: grafana.env.GF_AUTH_GENERIC_OAUTH_ENABLED
      value: "true"
    - key: grafana.env.GF_AUTH_GENERIC_OAUTH_CLIENT_ID
      value: default-client
    - key: grafana.env.GF_AUTH_GENERIC_OAUTH_CLIENT_SECRET
      valueFromEnv: DEFAULT_GRAFANA_SECRET
  registry:
    - key: password
      valueFromEnv: REGISTRY_PASSWORD
plans:
  trial:
    _global:
      - key: global.lowResourceProfile
        value: "true"
    registry:
      - key: password
        value: trial-password-in-clear
`

const (
	registryPassword     = "registry-pa55word"
	defaultGrafanaSecret = "default-grafana-s3cret"
)

func overridesStep(t *testing.T, e *env) step {
	t.Helper()
	env := map[string]string{"REGISTRY_PASSWORD": registryPassword, "DEFAULT_GRAFANA_SECRET": defaultGrafanaSecret}
	d, err := overrides.ParseDefaults([]byte(testOverrides), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	e.deps.Overrides = d
	return provisioning.OverridesFromConfig{Deps: e.deps}
}

func TestOverridesFromConfig_Name(t *testing.T) {
	assert.Equal(t, "Overrides_From_Secrets_And_Config_Step", provisioning.OverridesFromConfig{}.Name())
}

func TestOverridesFromConfig_GivesTheConfiguredDefaults(t *testing.T) {
	e := newEnv(t)
	out := e.mustRun(t, overridesStep(t, e), newOp(provData("azure", "westeurope")), t0)

	assert.Equal(t, overrides.Overrides{
		overrides.Global: {{Key: "global.domainName", Value: "kyma.example"}},
		"monitoring": {
			{Key: "grafana.env.GF_AUTH_GENERIC_OAUTH_ENABLED", Value: "true"},
			{Key: "grafana.env.GF_AUTH_GENERIC_OAUTH_CLIENT_ID", Value: "default-client"},
			{Key: "grafana.env.GF_AUTH_GENERIC_OAUTH_CLIENT_SECRET", Secret: true},
		},
		"registry": {{Key: "password", Secret: true}},
	}, out.Data.Overrides)
	assert.Equal(t, registryPassword, out.Secrets[overrides.SecretKey("registry", "password")])
	assertNotInData(t, out, registryPassword, defaultGrafanaSecret)
	resolved, err := out.Data.Overrides.Resolve(out.Secrets)
	require.NoError(t, err)
	assert.Equal(t, defaultGrafanaSecret, resolved["monitoring"][2].Value)
}

func TestOverridesFromConfig_PlanEntries(t *testing.T) {
	e := newEnv(t)
	data := provData("azure", "westeurope")
	data.PlanName = "trial"
	out := e.mustRun(t, overridesStep(t, e), newOp(data), t0)

	assert.Equal(t, []overrides.Entry{
		{Key: "global.domainName", Value: "kyma.example"},
		{Key: "global.lowResourceProfile", Value: "true"},
	}, out.Data.Overrides[overrides.Global])
	assert.Equal(t, []overrides.Entry{{Key: "password", Value: "trial-password-in-clear"}}, out.Data.Overrides["registry"],
		"the plan's entry replaces the common one")
	_, stored := out.Secrets[overrides.SecretKey("registry", "password")]
	assert.False(t, stored, "the replaced secret default is not kept")
}

// Entries the earlier steps set (IAS's Grafana client, with its secret) win over configured
// defaults of the same key, secret values included.
func TestOverridesFromConfig_EarlierEntriesWin(t *testing.T) {
	e := newEnv(t)
	op := newOp(provData("azure", "westeurope"))
	op.Data.Overrides.Set(&op.Secrets, provisioning.MonitoringComponent,
		overrides.Entry{Key: provisioning.GrafanaClientIDKey, Value: "ias-client"},
		overrides.Entry{Key: provisioning.GrafanaClientSecretK, Value: "ias-s3cret", Secret: true})

	out := e.mustRun(t, overridesStep(t, e), op, t0)
	assert.Equal(t, []overrides.Entry{
		{Key: provisioning.GrafanaClientIDKey, Value: "ias-client"},
		{Key: provisioning.GrafanaClientSecretK, Secret: true},
		{Key: "grafana.env.GF_AUTH_GENERIC_OAUTH_ENABLED", Value: "true"},
	}, out.Data.Overrides[provisioning.MonitoringComponent])
	assert.Equal(t, "ias-s3cret", out.Secrets[overrides.SecretKey(provisioning.MonitoringComponent, provisioning.GrafanaClientSecretK)],
		"the default does not replace the IAS client's secret")
	assertNotInData(t, out, "ias-s3cret", defaultGrafanaSecret)
}

func TestOverridesFromConfig_Idempotent(t *testing.T) {
	e := newEnv(t)
	s := overridesStep(t, e)
	first := e.mustRun(t, s, newOp(provData("azure", "westeurope")), t0)
	again := e.mustRun(t, s, first, t0.Add(testPoll))
	assert.Equal(t, first.Data.Overrides, again.Data.Overrides)
	assert.Equal(t, first.Secrets, again.Secrets)
}

func TestOverridesFromConfig_ShippedDefaults(t *testing.T) {
	d, err := overrides.ParseDefaults(resources.Overrides(), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	e := newEnv(t)
	e.deps.Overrides = d
	data := provData("gcp", "europe-west3")
	data.PlanName = "trial"
	out := e.mustRun(t, provisioning.OverridesFromConfig{Deps: e.deps}, newOp(data), t0)
	assert.Contains(t, out.Data.Overrides[overrides.Global], overrides.Entry{Key: "global.lowResourceProfile", Value: "true"})
	assert.Contains(t, out.Data.Overrides["monitoring"], overrides.Entry{Key: "grafana.env.GF_AUTH_GENERIC_OAUTH_ENABLED", Value: "true"})
}
