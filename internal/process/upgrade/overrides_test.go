package upgrade

import (
	"context"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const overridesStep = "Overrides_From_Secrets_And_Config_Step"

// testDefaults are configured defaults with a secret (from the environment) and a plan entry.
func testDefaults(t *testing.T) overrides.Defaults {
	t.Helper()
	d, err := overrides.ParseDefaults([]byte(`
components:
  _global:
    - {key: global.disableLegacyConnectivity, value: "true"}
  monitoring:
    - {key: grafana.clientID, value: grafana-id-new}
  eventing:
    - {key: nats.password, valueFromEnv: NATS_PASSWORD}
plans:
  azure:
    monitoring:
      - {key: retention, value: 30d}
  trial:
    monitoring:
      - {key: retention, value: 1d}
`), func(k string) (string, bool) {
		return map[string]string{"NATS_PASSWORD": "n4ts"}[k], k == "NATS_PASSWORD"
	})
	require.NoError(t, err)
	return d
}

func TestOverrides_Name(t *testing.T) {
	assert.Equal(t, overridesStep, Overrides{}.Name())
}

func TestOverrides_AppliesTheCurrentDefaultsOverTheRuntimes(t *testing.T) {
	e := newEnv(t)
	e.deps.Overrides = testDefaults(t)
	op := e.initialized(t, "2.21.0")

	out, wait, err := steptest.Run(context.Background(), Overrides{e.deps}, op, t0)
	require.NoError(t, err)
	assert.Zero(t, wait)

	o := out.Data.Overrides
	assert.Equal(t, []overrides.Entry{
		{Key: "grafana.clientID", Value: "grafana-id-new"},
		{Key: "grafana.clientSecret", Secret: true},
		{Key: "retention", Value: "30d"},
	}, o["monitoring"], "configuration replaces, the runtime's other entries stay, the plan's (azure) are added")
	assert.Equal(t, []overrides.Entry{
		{Key: "global.domainName", Value: "c-1234567.kyma.local"},
		{Key: "global.disableLegacyConnectivity", Value: "true"},
	}, o[overrides.Global])
	assert.Equal(t, []overrides.Entry{{Key: "nats.password", Secret: true}}, o["eventing"])
	assert.Equal(t, "n4ts", out.Secrets[overrides.SecretKey("eventing", "nats.password")])
	assert.Equal(t, grafanaSecret, out.Secrets[grafanaKey])
	assert.NotContains(t, dataJSON(t, out.Data), "n4ts", "secret values never in the data")

	once := clone(t, out)
	again, _, err := steptest.Run(context.Background(), Overrides{e.deps}, out, t0)
	require.NoError(t, err)
	assert.Equal(t, once.Data, again.Data, "applying again changes nothing")
	assert.Equal(t, once.Secrets, again.Secrets)
}

func TestOverrides_NoDefaults(t *testing.T) {
	e := newEnv(t)
	op := e.initialized(t, "2.21.0")
	out, wait, err := steptest.Run(context.Background(), Overrides{e.deps}, op, t0)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, op.Data, out.Data)
}
