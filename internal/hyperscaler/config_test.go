package hyperscaler

import (
	"encoding/json"
	"testing"

	"github.com/kelseyhightower/envconfig"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
)

func setJSON(t *testing.T, entries map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(entries)
	require.NoError(t, err)
	return string(raw)
}

func gardenerEntry(project, kubeconfig string) map[string]any {
	return map[string]any{"type": "gardener", "spec": map[string]any{"project": project, "kubeconfig": kubeconfig}}
}

func defaults(t *testing.T) Config {
	t.Helper()
	var c Config
	require.NoError(t, envconfig.Process("APP", &c))
	return c
}

func TestDefaultsAreTheListOnTheSimulatedBackend(t *testing.T) {
	c := defaults(t)
	assert.Equal(t, SourceAuto, c.Source)
	assert.Equal(t, "SecretBinding", c.BindingKind)
	assert.Equal(t, DefaultRules(), c.Rules())
	p, err := c.Build(infrastructure.Config{}, nil)
	require.NoError(t, err)
	list, ok := p.(List)
	require.True(t, ok, "no gardener backend: the configured list")
	assert.True(t, list.Stateless())
	assert.Equal(t, []Type{"aws", "azure", "gcp", "openstack"}, list.Types())

	c.Source = SourceGardener
	_, err = c.Build(infrastructure.Config{}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no gardener backend")
	c.Source = "somewhere"
	_, err = c.Build(infrastructure.Config{}, nil)
	assert.ErrorContains(t, err, "APP_HYPERSCALER_ACCOUNT_POOL_SOURCE")
}

func TestTheGardenerBackendsClusterHoldsThePool(t *testing.T) {
	kc := string(kubetest.Kubeconfig(t))
	c := defaults(t)
	backends := infrastructure.Config{SetJSON: setJSON(t, map[string]any{
		"sim": map[string]any{"type": "simulated", "spec": map[string]any{}}, "shoots": gardenerEntry("kyma-dev", kc),
	}), Default: "sim"}
	p, err := c.Build(backends, nil)
	require.NoError(t, err)
	g, ok := p.(*Gardener)
	require.True(t, ok, "the set's only gardener backend")
	assert.Equal(t, "garden-kyma-dev", g.Namespace())
	assert.Equal(t, SecretBinding, g.Kind())
	assert.False(t, g.Stateless())

	c.BindingKind = "credentialsbinding"
	p, err = c.Build(backends, nil)
	require.NoError(t, err)
	assert.Equal(t, CredentialsBinding, p.(*Gardener).Kind())
	c.BindingKind = "Secret"
	_, err = c.Build(backends, nil)
	assert.ErrorContains(t, err, "APP_HYPERSCALER_ACCOUNT_POOL_BINDING_KIND")

	c = defaults(t)
	c.Source = SourceList
	p, err = c.Build(backends, nil)
	require.NoError(t, err)
	assert.IsType(t, List{}, p, "the list when asked for")
}

func TestGardenerEntrySelection(t *testing.T) {
	two := setJSON(t, map[string]any{"eu": gardenerEntry("p-eu", "x"), "us": gardenerEntry("p-us", "x")})
	_, _, _, err := GardenerEntry(infrastructure.Config{SetJSON: two, Default: "eu"}, "")
	require.NoError(t, err)
	name, spec, found, err := GardenerEntry(infrastructure.Config{SetJSON: two, Default: "us"}, "")
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, "us", name, "the default entry")
	assert.Equal(t, "p-us", spec.Project)

	withSim := setJSON(t, map[string]any{"eu": gardenerEntry("p-eu", "x"), "us": gardenerEntry("p-us", "x"), "sim": map[string]any{"type": "simulated"}})
	_, _, _, err = GardenerEntry(infrastructure.Config{SetJSON: withSim, Default: "sim"}, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "APP_HYPERSCALER_ACCOUNT_POOL_PROVISIONER", "several and none the default: name one")
	name, _, _, err = GardenerEntry(infrastructure.Config{SetJSON: withSim, Default: "sim"}, "eu")
	require.NoError(t, err)
	assert.Equal(t, "eu", name)
	_, _, _, err = GardenerEntry(infrastructure.Config{SetJSON: withSim, Default: "sim"}, "sim")
	assert.ErrorContains(t, err, "no gardener entry")

	_, _, found, err = GardenerEntry(infrastructure.Config{}, "")
	require.NoError(t, err)
	assert.False(t, found, "the built-in simulated set")

	bad := setJSON(t, map[string]any{"g": map[string]any{"type": "gardener", "spec": map[string]any{"kubeconfig": "x"}}})
	_, _, _, err = GardenerEntry(infrastructure.Config{SetJSON: bad}, "")
	assert.ErrorContains(t, err, "project")
}
