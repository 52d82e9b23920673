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

// Deploy applies the release meta, the template and the Kyma resource (twice: idempotent); list
// shows the module through its release meta; enable and disable edit spec.modules.
func TestDeployListEnableDisable(t *testing.T) {
	ctx := context.Background()
	c, dyn := newCluster(t)
	ns := kubetest.Namespace(t)

	a := createSample(t, "deployed", "1.0.0", "registry.example")
	objs, err := TemplateObjects(a, TemplateOptions{Namespace: ns})
	require.NoError(t, err)
	spec := KymaSpec{Namespace: ns, Modules: []ModuleSpec{{Name: "deployed"}}}
	require.NoError(t, c.Deploy(ctx, objs, spec))
	require.NoError(t, c.Deploy(ctx, objs, spec))

	list, err := c.ListTemplates(ctx, ns)
	require.NoError(t, err)
	assert.Equal(t, []ClusterModule{{Module: "deployed", Channel: "fast", Version: "1.0.0", Component: "kyma-project.io/module/deployed", Template: ns + "/deployed-1.0.0"}}, list)
	// The CRD's defaults fill the entry in.
	assert.Equal(t, []any{map[string]any{"name": "deployed", "managed": true, "customResourcePolicy": "CreateAndDelete"}}, rawModules(t, dyn, ns))

	changed, err := c.Enable(ctx, ns, DefaultKymaName, ModuleSpec{Name: "other", Channel: "fast", CustomResourcePolicy: PolicyIgnore})
	require.NoError(t, err)
	assert.True(t, changed)
	changed, err = c.Enable(ctx, ns, DefaultKymaName, ModuleSpec{Name: "other", Channel: "fast", CustomResourcePolicy: PolicyIgnore})
	require.NoError(t, err)
	assert.False(t, changed, "enabling twice changes nothing")
	assert.Equal(t, []ModuleSpec{{Name: "deployed", CustomResourcePolicy: PolicyCreateAndDel}, {Name: "other", Channel: "fast", CustomResourcePolicy: PolicyIgnore}}, kymaModules(t, dyn, ns))

	changed, err = c.Disable(ctx, ns, DefaultKymaName, "deployed", "")
	require.NoError(t, err)
	assert.True(t, changed)
	changed, err = c.Disable(ctx, ns, DefaultKymaName, "deployed", "")
	require.NoError(t, err)
	assert.False(t, changed)
	// A channel that is not the entry's leaves it.
	changed, err = c.Disable(ctx, ns, DefaultKymaName, "other", "regular")
	require.NoError(t, err)
	assert.False(t, changed)
	assert.Equal(t, []ModuleSpec{{Name: "other", Channel: "fast", CustomResourcePolicy: PolicyIgnore}}, kymaModules(t, dyn, ns))

	// A later deploy without modules leaves the enabled ones alone.
	require.NoError(t, c.Deploy(ctx, objs, KymaSpec{Namespace: ns}))
	assert.Equal(t, []ModuleSpec{{Name: "other", Channel: "fast", CustomResourcePolicy: PolicyIgnore}}, kymaModules(t, dyn, ns))

	_, err = c.Enable(ctx, ns, DefaultKymaName, ModuleSpec{Name: "x", CustomResourcePolicy: "Sometimes"})
	assert.ErrorContains(t, err, "policy")
	_, err = c.Enable(ctx, ns, "missing", ModuleSpec{Name: "x"})
	assert.ErrorContains(t, err, "not found")
}

func rawModules(t *testing.T, dyn dynamic.Interface, ns string) []any {
	t.Helper()
	obj, err := dyn.Resource(KymaGVR).Namespace(ns).Get(context.Background(), DefaultKymaName, metav1.GetOptions{})
	require.NoError(t, err)
	mods, _, err := unstructured.NestedSlice(obj.Object, "spec", "modules")
	require.NoError(t, err)
	return mods
}

// Defect 7: enable and disable edit only the entry concerned; every field of the other entries
// (managed: false, controller, fields this CLI does not know) stays as it was.
func TestEnableDisableKeepOtherEntries(t *testing.T) {
	ctx := context.Background()
	c, dyn := newCluster(t)
	ns := kubetest.Namespace(t)
	require.NoError(t, c.Deploy(ctx, nil, KymaSpec{Namespace: ns}))
	kyma, err := dyn.Resource(KymaGVR).Namespace(ns).Get(ctx, DefaultKymaName, metav1.GetOptions{})
	require.NoError(t, err)
	others := []any{
		map[string]any{"name": "keda", "managed": false, "customResourcePolicy": "Ignore", "channel": "fast"},
		map[string]any{"name": "serverless", "managed": true, "customResourcePolicy": "CreateAndDelete", "controller": "sharded", "remoteModuleTemplateRef": "x"},
	}
	require.NoError(t, unstructured.SetNestedSlice(kyma.Object, others, "spec", "modules"))
	_, err = dyn.Resource(KymaGVR).Namespace(ns).Update(ctx, kyma, metav1.UpdateOptions{})
	require.NoError(t, err)
	want := rawModules(t, dyn, ns)

	_, err = c.Enable(ctx, ns, DefaultKymaName, ModuleSpec{Name: "sample", Channel: "fast"})
	require.NoError(t, err)
	got := rawModules(t, dyn, ns)
	require.Len(t, got, 3)
	assert.Equal(t, want, got[:2])
	// Changing one entry's channel keeps its other fields.
	_, err = c.Enable(ctx, ns, DefaultKymaName, ModuleSpec{Name: "keda", Channel: "regular"})
	require.NoError(t, err)
	got = rawModules(t, dyn, ns)
	assert.Equal(t, map[string]any{"name": "keda", "managed": false, "customResourcePolicy": "Ignore", "channel": "regular"}, got[0])
	assert.Equal(t, want[1], got[1])
	_, err = c.Disable(ctx, ns, DefaultKymaName, "sample", "")
	require.NoError(t, err)
	got = rawModules(t, dyn, ns)
	assert.Equal(t, want[1], got[1])
	assert.Equal(t, false, got[0].(map[string]any)["managed"])
}

// Enable's check and lifecycle-manager's lookup: through the release meta (channel -> version ->
// <module>-<version>), else a channel-named template; otherwise ErrNoTemplate naming why.
func TestResolve(t *testing.T) {
	ctx := context.Background()
	c, dyn := newCluster(t)
	ns := kubetest.Namespace(t)
	require.NoError(t, c.Deploy(ctx, nil, KymaSpec{Namespace: ns, Channel: "regular"}))

	err := c.CheckTemplate(ctx, ns, DefaultKymaName, ModuleSpec{Name: "sample"})
	require.ErrorIs(t, err, ErrNoTemplate)

	v1 := createSample(t, "sample", "1.0.0", "registry.example")
	v2 := createSample(t, "sample", "2.0.0", "registry.example")
	o1, err := TemplateObjects(v1, TemplateOptions{Namespace: ns, Channel: "regular"})
	require.NoError(t, err)
	o2, err := TemplateObjects(v2, TemplateOptions{Namespace: ns, Channel: "fast"})
	require.NoError(t, err)
	require.NoError(t, c.Deploy(ctx, append(o1, o2...), KymaSpec{Namespace: ns, Channel: "regular"}))

	// Both channels are kept in the one release meta.
	r, err := Resolve(ctx, dyn, ns, "sample", "fast")
	require.NoError(t, err)
	assert.Equal(t, "2.0.0", r.Version)
	assert.Equal(t, "sample-2.0.0", r.Template.GetName())
	require.NoError(t, c.CheckTemplate(ctx, ns, DefaultKymaName, ModuleSpec{Name: "sample"}))
	r, err = Resolve(ctx, dyn, ns, "sample", "regular")
	require.NoError(t, err)
	assert.Equal(t, "1.0.0", r.Version)
	_, err = Resolve(ctx, dyn, ns, "sample", "experimental")
	assert.ErrorContains(t, err, `has no channel "experimental" (channels: fast, regular)`)

	list, err := c.ListTemplates(ctx, ns)
	require.NoError(t, err)
	assert.Equal(t, []ClusterModule{
		{Module: "sample", Channel: "fast", Version: "2.0.0", Component: "kyma-project.io/module/sample", Template: ns + "/sample-2.0.0"},
		{Module: "sample", Channel: "regular", Version: "1.0.0", Component: "kyma-project.io/module/sample", Template: ns + "/sample-1.0.0"},
	}, list)

	// Templating a new version into a channel moves only that channel.
	v3 := createSample(t, "sample", "3.0.0", "registry.example")
	o3, err := TemplateObjects(v3, TemplateOptions{Namespace: ns, Channel: "fast"})
	require.NoError(t, err)
	require.NoError(t, c.Deploy(ctx, o3, KymaSpec{Namespace: ns, Channel: "regular"}))
	r, err = Resolve(ctx, dyn, ns, "sample", "fast")
	require.NoError(t, err)
	assert.Equal(t, "3.0.0", r.Version)
	r, err = Resolve(ctx, dyn, ns, "sample", "regular")
	require.NoError(t, err)
	assert.Equal(t, "1.0.0", r.Version)

	// A channel-named template of an older lifecycle-manager, without release meta.
	legacy := createSample(t, "legacy", "1.0.0", "registry.example")
	lt, err := TemplateObjects(legacy, TemplateOptions{Namespace: ns, ChannelNamed: true})
	require.NoError(t, err)
	require.Len(t, lt, 1)
	assert.Equal(t, "legacy-fast", lt[0].GetName())
	require.NoError(t, c.Deploy(ctx, lt, KymaSpec{Namespace: ns, Channel: "regular"}))
	r, err = Resolve(ctx, dyn, ns, "legacy", "fast")
	require.NoError(t, err)
	assert.Equal(t, "legacy-fast", r.Template.GetName())
	_, err = Resolve(ctx, dyn, ns, "legacy", "regular")
	assert.ErrorIs(t, err, ErrNoTemplate)
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
