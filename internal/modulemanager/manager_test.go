package modulemanager

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"os"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/module"
	"github.com/kyma-project/kyma-environment-broker/internal/module/moduletest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

var configMapGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

func testLog() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(os.Stderr)
	l.SetLevel(logrus.WarnLevel)
	return l
}

// env is a registry, a namespace with a Kyma resource, and a signing key.
type env struct {
	t     *testing.T
	reg   *module.Registry
	addr  string
	ns    string
	key   *rsa.PrivateKey
	dyn   dynamic.Interface
	cl    *module.Cluster
	ctx   context.Context
	other *rsa.PrivateKey
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, moduletest.Start(t, moduletest.Options{}))
}

// newEnvWith is newEnv on the registry srv (pushing with its credentials, if any).
func newEnvWith(t *testing.T, srv *moduletest.Registry) *env {
	t.Helper()
	reg, err := module.NewRegistry(module.RegistryOptions{Registry: srv.Addr, Insecure: true, Username: srv.Username, Password: srv.Password}, testLog())
	require.NoError(t, err)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	cl, err := module.NewCluster(kubetest.RESTConfig(t), testLog())
	require.NoError(t, err)
	e := &env{t: t, reg: reg, addr: srv.Addr, ns: kubetest.Namespace(t), key: key, other: other, dyn: kubetest.Dynamic(t), cl: cl, ctx: context.Background()}
	require.NoError(t, cl.Deploy(e.ctx, nil, module.KymaSpec{Namespace: e.ns, Channel: "regular"}))
	return e
}

// publish creates, optionally signs, pushes and templates (into the Kyma's namespace) a module.
func (e *env) publish(name, version, channel string, sign func(*module.Artifact)) {
	t := e.t
	t.Helper()
	dir := t.TempDir()
	cfg, err := module.LoadConfig(moduletest.WriteInstallable(t, dir, name, version, channel, e.ns))
	require.NoError(t, err)
	a, err := module.Create(e.ctx, module.CreateOptions{Config: cfg, Dir: dir, Registry: e.addr})
	require.NoError(t, err)
	if sign != nil {
		sign(a)
	}
	_, err = e.reg.Push(e.ctx, a, false)
	require.NoError(t, err)
	objs, err := module.TemplateObjects(a, module.TemplateOptions{Namespace: e.ns})
	require.NoError(t, err)
	require.NoError(t, e.cl.Deploy(e.ctx, objs, module.KymaSpec{Namespace: e.ns, Channel: "regular"}))
}

func (e *env) signWith(k *rsa.PrivateKey) func(*module.Artifact) {
	return func(a *module.Artifact) { require.NoError(e.t, a.Sign("", k)) }
}

func (e *env) startManager(cfg Config) {
	t := e.t
	cfg.Namespace = e.ns
	cfg.PlainHTTPRegistries = []string{e.addr}
	cfg.Requeue = 200 * time.Millisecond
	cfg.Resync = 2 * time.Second
	cfg.Log = testLog()
	m, err := New(kubetest.RESTConfig(t), cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
}

func (e *env) kyma() *unstructured.Unstructured {
	obj, err := e.dyn.Resource(module.KymaGVR).Namespace(e.ns).Get(e.ctx, module.DefaultKymaName, metav1.GetOptions{})
	require.NoError(e.t, err)
	return obj
}

func moduleStatusOf(kyma *unstructured.Unstructured, name string) map[string]any {
	list, _, _ := unstructured.NestedSlice(kyma.Object, "status", "modules")
	for _, it := range list {
		if m, ok := it.(map[string]any); ok && m["name"] == name {
			return m
		}
	}
	return nil
}

// waitModule polls until the module's status satisfies ok.
func (e *env) waitModule(name string, ok func(map[string]any) bool) map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var last map[string]any
	for time.Now().Before(deadline) {
		last = moduleStatusOf(e.kyma(), name)
		if ok(last) {
			return last
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("module %s: condition not reached; last status %v", name, last)
	return nil
}

func state(want string) func(map[string]any) bool {
	return func(s map[string]any) bool { return s != nil && s["state"] == want }
}

func (e *env) exists(gvr schema.GroupVersionResource, ns, name string) bool {
	_, err := e.dyn.Resource(gvr).Namespace(ns).Get(e.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(e.t, err)
	return true
}

// The manager installs an enabled module (manifest, CRD, default CR) once it verifies, reports
// it Ready when the module's operator says so, upgrades it when its channel changes (pruning
// what the new version dropped), refuses unsigned and wrongly signed modules naming why, and
// removes a disabled module.
func TestManagerInstallUpgradeRemove(t *testing.T) {
	e := newEnv(t)
	e.publish("sample", "1.0.0", "regular", e.signWith(e.key))
	e.publish("sample", "2.0.0", "fast", e.signWith(e.key))
	moduletest.RunSampleOperator(t, e.dyn, "sample", e.ns)
	e.startManager(Config{PublicKeys: []*rsa.PublicKey{&e.key.PublicKey}})

	_, err := e.cl.Enable(e.ctx, e.ns, module.DefaultKymaName, module.ModuleSpec{Name: "sample"})
	require.NoError(t, err)
	st := e.waitModule("sample", state(StateReady))
	assert.Equal(t, "1.0.0", st["version"])
	assert.Equal(t, "regular", st["channel"])
	assert.Equal(t, "kyma-project.io/module/sample", st["fqdn"])
	assert.True(t, e.exists(configMapGVR, e.ns, "sample-operator"))
	assert.True(t, e.exists(configMapGVR, e.ns, "sample-v1.0.0"))
	assert.True(t, e.exists(moduletest.OperatorGVR("sample"), e.ns, "sample"))
	kyma := e.kyma()
	s, _, _ := unstructured.NestedString(kyma.Object, "status", "state")
	assert.Equal(t, StateReady, s)
	assert.Contains(t, kyma.GetFinalizers(), Finalizer)

	// A changed channel upgrades: 2.0.0's objects, 1.0.0's own ConfigMap pruned.
	_, err = e.cl.Enable(e.ctx, e.ns, module.DefaultKymaName, module.ModuleSpec{Name: "sample", Channel: "fast"})
	require.NoError(t, err)
	st = e.waitModule("sample", func(s map[string]any) bool { return s != nil && s["version"] == "2.0.0" && s["state"] == StateReady })
	assert.Equal(t, "fast", st["channel"])
	cm, err := e.dyn.Resource(configMapGVR).Namespace(e.ns).Get(e.ctx, "sample-operator", metav1.GetOptions{})
	require.NoError(t, err)
	v, _, _ := unstructured.NestedString(cm.Object, "data", "version")
	assert.Equal(t, "2.0.0", v)
	assert.True(t, e.exists(configMapGVR, e.ns, "sample-v2.0.0"))
	assert.False(t, e.exists(configMapGVR, e.ns, "sample-v1.0.0"), "pruned on upgrade")

	// Unsigned, signed with another key, changed after signing: Error naming why, nothing applied.
	e.publish("unsigned", "1.0.0", "regular", nil)
	e.publish("stranger", "1.0.0", "regular", e.signWith(e.other))
	e.publish("tampered", "1.0.0", "regular", func(a *module.Artifact) {
		require.NoError(t, a.Sign("", e.key))
		a.Descriptor.Component.Provider = "someone-else"
	})
	for _, n := range []string{"unsigned", "stranger", "tampered"} {
		_, err = e.cl.Enable(e.ctx, e.ns, module.DefaultKymaName, module.ModuleSpec{Name: n})
		require.NoError(t, err)
	}
	assert.Contains(t, e.waitModule("unsigned", state(StateError))["message"], "not signed")
	assert.Contains(t, e.waitModule("stranger", state(StateError))["message"], "signature does not match")
	assert.Contains(t, e.waitModule("tampered", state(StateError))["message"], "descriptor digest does not match")
	for _, n := range []string{"unsigned", "stranger", "tampered"} {
		assert.False(t, e.exists(configMapGVR, e.ns, n+"-operator"), "%s applied", n)
	}
	s, _, _ = unstructured.NestedString(e.kyma().Object, "status", "state")
	assert.Equal(t, StateError, s)
	for _, n := range []string{"unsigned", "stranger", "tampered"} {
		_, err = e.cl.Disable(e.ctx, e.ns, module.DefaultKymaName, n, "")
		require.NoError(t, err)
	}

	// Disable removes the CR, the manifest's objects and the CRD.
	_, err = e.cl.Disable(e.ctx, e.ns, module.DefaultKymaName, "sample", "")
	require.NoError(t, err)
	require.NoError(t, e.cl.WaitRemoved(e.ctx, e.ns, module.DefaultKymaName, "sample", 100*time.Millisecond, nil))
	assert.False(t, e.exists(configMapGVR, e.ns, "sample-operator"))
	assert.False(t, e.exists(configMapGVR, e.ns, "sample-v2.0.0"))
	assert.False(t, e.exists(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, "", "samples.sample.kyma-project.io"))
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, _, _ = unstructured.NestedString(e.kyma().Object, "status", "state")
		if s == StateReady || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	assert.Equal(t, StateReady, s)
}

// Policy Ignore: the default CR is not created; the module is Ready once its manifest is
// applied. A template's customStateCheck maps the CR's fields to the module's state.
func TestManagerPolicyAndCustomStateCheck(t *testing.T) {
	e := newEnv(t)
	e.publish("ignored", "1.0.0", "regular", e.signWith(e.key))
	e.publish("checked", "1.0.0", "regular", e.signWith(e.key))
	// The template says: replicas 1 means Ready (no operator reports anything).
	tmpl, err := e.dyn.Resource(module.ModuleTemplateGVR).Namespace(e.ns).Get(e.ctx, "checked-1.0.0", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedSlice(tmpl.Object, []any{map[string]any{"jsonPath": "spec.replicas", "value": "1", "mappedState": "Ready"}}, "spec", "customStateCheck"))
	_, err = e.dyn.Resource(module.ModuleTemplateGVR).Namespace(e.ns).Update(e.ctx, tmpl, metav1.UpdateOptions{})
	require.NoError(t, err)
	e.startManager(Config{PublicKeys: []*rsa.PublicKey{&e.key.PublicKey}})

	_, err = e.cl.Enable(e.ctx, e.ns, module.DefaultKymaName, module.ModuleSpec{Name: "ignored", CustomResourcePolicy: module.PolicyIgnore})
	require.NoError(t, err)
	_, err = e.cl.Enable(e.ctx, e.ns, module.DefaultKymaName, module.ModuleSpec{Name: "checked"})
	require.NoError(t, err)
	e.waitModule("ignored", state(StateReady))
	assert.True(t, e.exists(configMapGVR, e.ns, "ignored-operator"))
	assert.False(t, e.exists(moduletest.OperatorGVR("ignored"), e.ns, "ignored"), "no default CR with policy Ignore")
	e.waitModule("checked", state(StateReady))
	assert.True(t, e.exists(moduletest.OperatorGVR("checked"), e.ns, "checked"))

	// Deleting the Kyma resource removes every module, then the finalizer.
	require.NoError(t, e.dyn.Resource(module.KymaGVR).Namespace(e.ns).Delete(e.ctx, module.DefaultKymaName, metav1.DeleteOptions{}))
	deadline := time.Now().Add(60 * time.Second)
	for e.exists(module.KymaGVR, e.ns, module.DefaultKymaName) {
		require.True(t, time.Now().Before(deadline), "Kyma resource not deleted")
		time.Sleep(100 * time.Millisecond)
	}
	assert.False(t, e.exists(configMapGVR, e.ns, "ignored-operator"))
	assert.False(t, e.exists(configMapGVR, e.ns, "checked-operator"))
}
