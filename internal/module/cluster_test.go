package module

import (
	"context"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/module/moduletest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

func newCluster(t *testing.T) (*Cluster, dynamic.Interface) {
	t.Helper()
	c, err := NewCluster(kubetest.RESTConfig(t), testLog())
	require.NoError(t, err)
	return c, kubetest.Dynamic(t)
}

func kymaModules(t *testing.T, dyn dynamic.Interface, ns string) []ModuleSpec {
	t.Helper()
	obj, err := dyn.Resource(KymaGVR).Namespace(ns).Get(context.Background(), DefaultKymaName, metav1.GetOptions{})
	require.NoError(t, err)
	mods, err := KymaModules(obj)
	require.NoError(t, err)
	return mods
}

// Deploy applies templates and the Kyma resource (twice: idempotent); list shows the templates;
// enable and disable edit spec.modules.
func TestDeployListEnableDisable(t *testing.T) {
	ctx := context.Background()
	c, dyn := newCluster(t)
	ns := kubetest.Namespace(t)

	a := createSample(t, "deployed", "1.0.0", "registry.example")
	tmpl, err := Template(a, TemplateOptions{Namespace: ns})
	require.NoError(t, err)
	spec := KymaSpec{Namespace: ns, Modules: []ModuleSpec{{Name: "deployed"}}}
	require.NoError(t, c.Deploy(ctx, []*unstructured.Unstructured{tmpl}, spec))
	require.NoError(t, c.Deploy(ctx, []*unstructured.Unstructured{tmpl}, spec))

	list, err := c.ListTemplates(ctx, ns)
	require.NoError(t, err)
	assert.Equal(t, []ClusterModule{{Module: "deployed", Channel: "fast", Version: "1.0.0", Component: "kyma-project.io/module/deployed", Template: ns + "/deployed-fast"}}, list)
	assert.Equal(t, []ModuleSpec{{Name: "deployed"}}, kymaModules(t, dyn, ns))

	changed, err := c.Enable(ctx, ns, DefaultKymaName, ModuleSpec{Name: "other", Channel: "fast", CustomResourcePolicy: PolicyIgnore})
	require.NoError(t, err)
	assert.True(t, changed)
	changed, err = c.Enable(ctx, ns, DefaultKymaName, ModuleSpec{Name: "other", Channel: "fast", CustomResourcePolicy: PolicyIgnore})
	require.NoError(t, err)
	assert.False(t, changed, "enabling twice changes nothing")
	assert.Equal(t, []ModuleSpec{{Name: "deployed"}, {Name: "other", Channel: "fast", CustomResourcePolicy: PolicyIgnore}}, kymaModules(t, dyn, ns))

	changed, err = c.Disable(ctx, ns, DefaultKymaName, "deployed")
	require.NoError(t, err)
	assert.True(t, changed)
	changed, err = c.Disable(ctx, ns, DefaultKymaName, "deployed")
	require.NoError(t, err)
	assert.False(t, changed)
	assert.Equal(t, []ModuleSpec{{Name: "other", Channel: "fast", CustomResourcePolicy: PolicyIgnore}}, kymaModules(t, dyn, ns))

	// A later deploy without modules leaves the enabled ones alone.
	require.NoError(t, c.Deploy(ctx, []*unstructured.Unstructured{tmpl}, KymaSpec{Namespace: ns}))
	assert.Equal(t, []ModuleSpec{{Name: "other", Channel: "fast", CustomResourcePolicy: PolicyIgnore}}, kymaModules(t, dyn, ns))

	_, err = c.Enable(ctx, ns, DefaultKymaName, ModuleSpec{Name: "x", CustomResourcePolicy: "Sometimes"})
	assert.ErrorContains(t, err, "policy")
	_, err = c.Enable(ctx, ns, "missing", ModuleSpec{Name: "x"})
	assert.ErrorContains(t, err, "not found")
}

// Concurrent enables of different modules all land (conflict retries).
func TestEnableConcurrent(t *testing.T) {
	ctx := context.Background()
	c, dyn := newCluster(t)
	ns := kubetest.Namespace(t)
	require.NoError(t, c.Deploy(ctx, nil, KymaSpec{Namespace: ns}))
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	errs := make(chan error, len(names))
	for _, n := range names {
		go func() { _, err := c.Enable(ctx, ns, DefaultKymaName, ModuleSpec{Name: n}); errs <- err }()
	}
	for range names {
		require.NoError(t, <-errs)
	}
	got := map[string]bool{}
	for _, m := range kymaModules(t, dyn, ns) {
		got[m.Name] = true
	}
	assert.Len(t, got, len(names))
}

func TestWaitReady(t *testing.T) {
	ctx := context.Background()
	c, dyn := newCluster(t)
	ns := kubetest.Namespace(t)
	require.NoError(t, c.Deploy(ctx, nil, KymaSpec{Namespace: ns}))

	// Without a controller the wait ends at its deadline, saying the last state.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err := c.Enable(ctx, ns, DefaultKymaName, ModuleSpec{Name: "lonely"})
	require.NoError(t, err)
	err = c.WaitReady(short, ns, DefaultKymaName, "lonely", 50*time.Millisecond, nil)
	assert.ErrorContains(t, err, "last state: not reported")

	moduletest.RunReadyController(t, dyn, ns)
	_, err = c.Enable(ctx, ns, DefaultKymaName, ModuleSpec{Name: "sample"})
	require.NoError(t, err)
	var states []string
	long, cancel2 := context.WithTimeout(ctx, time.Minute)
	defer cancel2()
	require.NoError(t, c.WaitReady(long, ns, DefaultKymaName, "sample", 50*time.Millisecond, func(s string) { states = append(states, s) }))
	assert.Equal(t, StateReady, states[len(states)-1])
}
