package backends_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kelseyhightower/envconfig"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/backends"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/gardener"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/internal/seed004"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/kubernetes"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/simulated"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/static"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

var ctx = context.Background()

// allocs is never called: building a static backend only keeps it.
type allocs struct{ storage.StaticAllocations }

const kubeconfig = seed004.UnreachableKubeconfig

func TestDefaultIsSimulated(t *testing.T) {
	var cfg infrastructure.Config
	require.NoError(t, envconfig.Process("APP", &cfg))
	set, err := backends.NewSet(ctx, cfg, infrastructure.Deps{})
	require.NoError(t, err)
	assert.Equal(t, []string{"simulated"}, set.Names())
	assert.Equal(t, "simulated", set.Default())
	b, err := set.Get("")
	require.NoError(t, err)
	assert.IsType(t, &simulated.Backend{}, b)
}

func TestEveryTypeFromEnv(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(kubeconfig), 0o600))
	t.Setenv("APP_PROVISIONER_SET_JSON", `{
		"garden": {"type": "gardener", "spec": {"project": "kyma", "kubeconfig_path": "`+kc+`"}},
		"k8s": {"type": "kubernetes", "spec": {"namespace": "rt", "kubeconfig_path": "`+kc+`", "host": "*.example.com", "image": "img", "data_dir": "/data"}},
		"pool-a": {"type": "static", "spec": {"runtimes": [{"host": "h", "slots": 2, "kubeconfig_path": "`+kc+`", "domain": "h.example.com"}]}},
		"sim": {"type": "simulated", "spec": {"creationDuration": "10s"}},
		"sim-default": {"type": "simulated"}
	}`)
	t.Setenv("APP_DEFAULT_PROVISIONER", "sim")
	var cfg infrastructure.Config
	require.NoError(t, envconfig.Process("APP", &cfg))
	set, err := backends.NewSet(ctx, cfg, infrastructure.Deps{Static: allocs{}})
	require.NoError(t, err)
	assert.Equal(t, []string{"garden", "k8s", "pool-a", "sim", "sim-default"}, set.Names())
	assert.Equal(t, "sim", set.Default())
	for name, want := range map[string]any{
		"garden": &gardener.Backend{}, "k8s": &kubernetes.Backend{}, "pool-a": &static.Backend{},
		"sim": &simulated.Backend{}, "": &simulated.Backend{},
	} {
		b, err := set.Get(name)
		require.NoError(t, err, name)
		assert.IsType(t, want, b, name)
	}
	typ, err := set.Type("pool-a")
	require.NoError(t, err)
	assert.Equal(t, "static", typ)

	_, err = set.Get("nope")
	assert.ErrorIs(t, err, infrastructure.ErrUnknownBackend)
	assert.ErrorContains(t, err, `"garden", "k8s", "pool-a", "sim", "sim-default"`, "names the available ones")
}

// TestSeedSetFromEnv: seed 004's example set, copied as written (with its // comments) into
// the seed's variables, loads; its relative paths are taken from the working directory.
func TestSeedSetFromEnv(t *testing.T) {
	doc, err := seed004.SetJSON()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, seed004.WriteExample(dir, []byte(kubeconfig)))
	t.Chdir(dir)
	t.Setenv(infrastructure.EnvRillSetJSON, doc)
	t.Setenv(infrastructure.EnvRillDefault, "kubernetes-example")
	var cfg infrastructure.Config
	require.NoError(t, envconfig.Process("APP", &cfg))
	set, err := backends.NewSet(ctx, cfg, infrastructure.Deps{Static: allocs{}})
	require.NoError(t, err)
	assert.Equal(t, []string{"kubernetes-example", "static-example"}, set.Names())
	assert.Equal(t, "kubernetes-example", set.Default())
	b, err := set.Get("")
	require.NoError(t, err)
	assert.IsType(t, &kubernetes.Backend{}, b)
	b, err = set.Get("static-example")
	require.NoError(t, err)
	assert.IsType(t, &static.Backend{}, b)

	// The APP_ names win when they say the same; differing, one would be ignored: an error.
	t.Setenv("APP_DEFAULT_PROVISIONER", "kubernetes-example")
	require.NoError(t, envconfig.Process("APP", &cfg))
	_, err = backends.NewSet(ctx, cfg, infrastructure.Deps{Static: allocs{}})
	require.NoError(t, err)
	t.Setenv("APP_DEFAULT_PROVISIONER", "static-example")
	require.NoError(t, envconfig.Process("APP", &cfg))
	_, err = backends.NewSet(ctx, cfg, infrastructure.Deps{Static: allocs{}})
	assert.ErrorContains(t, err, "APP_DEFAULT_PROVISIONER and RILL_ADMIN_DEFAULT_PROVISIONER are both set and differ")
	t.Setenv("APP_PROVISIONER_SET_JSON", `{"sim": {"type": "simulated"}}`)
	require.NoError(t, envconfig.Process("APP", &cfg))
	_, err = backends.NewSet(ctx, cfg, infrastructure.Deps{Static: allocs{}})
	assert.ErrorContains(t, err, "APP_PROVISIONER_SET_JSON and RILL_ADMIN_PROVISIONER_SET_JSON are both set and differ")
}

func TestSetFileYAML(t *testing.T) {
	f := filepath.Join(t.TempDir(), "set.yaml")
	require.NoError(t, os.WriteFile(f, []byte(`
only:
  type: simulated
  spec:
    domainDelay: 0s
`), 0o600))
	set, err := backends.NewSet(ctx, infrastructure.Config{SetFile: f}, infrastructure.Deps{})
	require.NoError(t, err)
	assert.Equal(t, "only", set.Default(), "a set of one needs no default")
}

func TestBadConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  infrastructure.Config
		want string
	}{
		{infrastructure.Config{SetJSON: `{"pool-a": {"type": "static", "spec": {"runtimes": [{"host": "a", "slots": 1, "kubeconfig": "k", "domain": "d"}, {"host": "b", "slots": 0, "kubeconfig": "k", "domain": "d"}]}}}`},
			`provisioner set entry "pool-a": spec.runtimes[1].slots must be > 0`},
		{infrastructure.Config{SetJSON: `{"x": {"type": "cloud", "spec": {}}}`}, `provisioner set entry "x": unknown type "cloud" (known: gardener, kubernetes, simulated, static)`},
		{infrastructure.Config{SetJSON: `{"x": {"spec": {}}}`}, `provisioner set entry "x": type is required`},
		{infrastructure.Config{SetJSON: `{"x": {"type": "simulated", "specs": {}}}`}, `provisioner set entry "x": must be {"type": ..., "spec": {...}}`},
		{infrastructure.Config{SetJSON: `{"x": {"type": "simulated", "spec": []}}`}, `provisioner set entry "x": spec must be an object`},
		{infrastructure.Config{SetJSON: `{"x": {"type": "simulated", "spec": {"creationDuration": "long"}}}`}, `provisioner set entry "x": spec.creationDuration`},
		{infrastructure.Config{SetJSON: `{"g": {"type": "gardener", "spec": {"kubeconfig": "k"}}}`}, `provisioner set entry "g": spec.project is required`},
		{infrastructure.Config{SetJSON: `[]`}, "must be a JSON object"},
		{infrastructure.Config{SetJSON: `{}`}, "no entries"},
		{infrastructure.Config{SetJSON: `{"a": {"type": "simulated"}, "b": {"type": "simulated"}}`}, `APP_DEFAULT_PROVISIONER is not set: name one of "a", "b"`},
		{infrastructure.Config{SetJSON: `{"a": {"type": "simulated"}}`, Default: "b"}, `APP_DEFAULT_PROVISIONER "b" is not in the set (available: "a")`},
		{infrastructure.Config{SetJSON: `{}`, SetFile: "f"}, "not both"},
		{infrastructure.Config{SetFile: "/nonexistent/set.yaml"}, "APP_PROVISIONER_SET_FILE"},
		{infrastructure.Config{Default: "gardener"}, `APP_DEFAULT_PROVISIONER is "gardener" but no set is configured`},
	} {
		_, err := backends.NewSet(ctx, tc.cfg, infrastructure.Deps{Static: allocs{}})
		assert.ErrorContains(t, err, tc.want, "%+v", tc.cfg)
	}
}
