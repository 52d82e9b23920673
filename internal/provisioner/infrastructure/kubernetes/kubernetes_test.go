package kubernetes_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/kubernetes"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

var (
	stsGVR     = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	svcGVR     = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	ingressGVR = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}
)

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

type env struct {
	ns    string
	kc    string
	dyn   dynamic.Interface
	clock *clock
}

func newEnv(t *testing.T) *env {
	return &env{ns: kubetest.Namespace(t), kc: string(kubetest.Kubeconfig(t)), dyn: kubetest.Dynamic(t), clock: &clock{now: time.Now()}}
}

func (e *env) spec(extra map[string]any) map[string]any {
	s := map[string]any{"namespace": e.ns, "kubeconfig": e.kc, "host": "*.runtimes.example.com", "image": "example.com/runtime:1", "timeout_seconds": 60}
	for k, v := range extra {
		s[k] = v
	}
	return s
}

func (e *env) backend(t *testing.T, spec map[string]any) *kubernetes.Backend {
	t.Helper()
	raw, err := json.Marshal(spec)
	require.NoError(t, err)
	var s kubernetes.Spec
	require.NoError(t, infrastructure.DecodeSpec(raw, &s))
	b, err := kubernetes.New(s, nil, kubernetes.WithNow(e.clock.Now))
	require.NoError(t, err)
	return b
}

func (e *env) get(t *testing.T, gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := e.dyn.Resource(gvr).Namespace(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err, "%s %s", gvr.Resource, name)
	return u
}

// statefulSetReady plays the StatefulSet controller: all replicas ready at the current
// generation.
func (e *env) statefulSetReady(t *testing.T, name string) {
	t.Helper()
	s := e.get(t, stsGVR, name)
	require.NoError(t, unstructured.SetNestedMap(s.Object, map[string]any{
		"observedGeneration": s.GetGeneration(), "replicas": int64(1), "readyReplicas": int64(1),
		"currentReplicas": int64(1), "updatedReplicas": int64(1), "availableReplicas": int64(1),
	}, "status"))
	_, err := e.dyn.Resource(stsGVR).Namespace(e.ns).UpdateStatus(context.Background(), s, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// collectGarbage plays the garbage collector: it drops the finalizers of the runtime's objects
// that are being deleted.
func (e *env) collectGarbage(t *testing.T, runtimeID string) {
	t.Helper()
	ctx := context.Background()
	for _, gvr := range []schema.GroupVersionResource{stsGVR, svcGVR, ingressGVR} {
		list, err := e.dyn.Resource(gvr).Namespace(e.ns).List(ctx, metav1.ListOptions{LabelSelector: kubernetes.LabelRuntimeID + "=" + runtimeID})
		require.NoError(t, err)
		for _, item := range list.Items {
			if item.GetDeletionTimestamp() == nil {
				continue
			}
			_, err := e.dyn.Resource(gvr).Namespace(e.ns).Patch(ctx, item.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			if !apierrors.IsNotFound(err) {
				require.NoError(t, err)
			}
		}
	}
}

const rtID = "0f4e1c2a-5b6d-4e7f-8a9b-0c1d2e3f4a5b"

func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	b := e.backend(t, e.spec(nil))
	spec := infrastructure.Spec{RuntimeID: rtID, OperationID: "op-1", RequestedAt: e.clock.now}
	name := "kyma-" + rtID

	_, err := b.Status(ctx, spec)
	require.ErrorIs(t, err, infrastructure.ErrNotFound)
	require.NoError(t, b.Create(ctx, spec))
	require.NoError(t, b.Create(ctx, spec), "idempotent")

	wantLabels := map[string]string{kubernetes.LabelRuntimeID: rtID, kubernetes.LabelManagedBy: "keb"}
	for _, gvr := range []schema.GroupVersionResource{stsGVR, svcGVR, ingressGVR} {
		u := e.get(t, gvr, name)
		for k, v := range wantLabels {
			assert.Equal(t, v, u.GetLabels()[k], "%s label %s", gvr.Resource, k)
		}
		managers := map[string]bool{}
		for _, mf := range u.GetManagedFields() {
			managers[mf.Manager] = mf.Operation == metav1.ManagedFieldsOperationApply
		}
		assert.True(t, managers[kubernetes.FieldManager], "%s applied server-side by %s: %v", gvr.Resource, kubernetes.FieldManager, managers)
	}
	sts := e.get(t, stsGVR, name)
	containers, _, _ := unstructured.NestedSlice(sts.Object, "spec", "template", "spec", "containers")
	require.Len(t, containers, 1)
	assert.Equal(t, "example.com/runtime:1", containers[0].(map[string]any)["image"])
	podLabels, _, _ := unstructured.NestedStringMap(sts.Object, "spec", "template", "metadata", "labels")
	assert.Equal(t, rtID, podLabels[kubernetes.LabelRuntimeID])
	rules, _, _ := unstructured.NestedSlice(e.get(t, ingressGVR, name).Object, "spec", "rules")
	require.Len(t, rules, 1)
	assert.Equal(t, rtID+".runtimes.example.com", rules[0].(map[string]any)["host"])

	st, err := b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.Status{Domain: rtID + ".runtimes.example.com", Phase: infrastructure.PhaseInProgress}, st,
		"no kubelet: never ready by itself")
	e.statefulSetReady(t, name)
	st, err = b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.PhaseSucceeded, st.Phase)
	assert.Equal(t, sts.GetGeneration(), st.ObservedRevision)

	kc, err := b.Kubeconfig(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, e.kc, kc, "the host cluster's kubeconfig")

	// Update with the same spec changes nothing; with a new image the generation moves on.
	rev, err := b.Update(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, sts.GetGeneration(), rev)
	b2 := e.backend(t, e.spec(map[string]any{"image": "example.com/runtime:2"}))
	rev2, err := b2.Update(ctx, spec)
	require.NoError(t, err)
	assert.Greater(t, rev2, rev)
	st, err = b2.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.PhaseInProgress, st.Phase, "the new generation is not observed yet")
	e.statefulSetReady(t, name)
	st, err = b2.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.PhaseSucceeded, st.Phase)
	assert.Equal(t, rev2, st.ObservedRevision)

	assert.ErrorIs(t, b.Hibernate(ctx, spec), infrastructure.ErrNotSupported)

	// Another runtime in the same namespace is left alone by the deletion.
	other := infrastructure.Spec{RuntimeID: "other-runtime", RequestedAt: e.clock.now}
	require.NoError(t, b.Create(ctx, other))

	gone, err := b.Deleted(ctx, spec)
	require.NoError(t, err)
	assert.False(t, gone)
	require.NoError(t, b.Delete(ctx, spec))
	require.NoError(t, b.Delete(ctx, spec), "deleting again is fine")
	u := e.get(t, stsGVR, name)
	assert.NotNil(t, u.GetDeletionTimestamp(), "foreground deletion waits for the garbage collector")
	assert.Contains(t, u.GetFinalizers(), metav1.FinalizerDeleteDependents)
	gone, err = b.Deleted(ctx, spec)
	require.NoError(t, err)
	assert.False(t, gone)

	e.collectGarbage(t, rtID)
	require.Eventually(t, func() bool {
		gone, err := b.Deleted(ctx, spec)
		return err == nil && gone
	}, 10*time.Second, 100*time.Millisecond)
	for _, gvr := range []schema.GroupVersionResource{stsGVR, svcGVR, ingressGVR} {
		_, err := e.dyn.Resource(gvr).Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "%s deleted", gvr.Resource)
		e.get(t, gvr, "kyma-other-runtime")
	}
	require.NoError(t, b.Delete(ctx, spec), "deleting a deleted runtime is fine")
	_, err = b.Status(ctx, spec)
	assert.ErrorIs(t, err, infrastructure.ErrNotFound)
}

func TestReadinessTimeout(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	b := e.backend(t, e.spec(map[string]any{"timeout_seconds": 30}))
	spec := infrastructure.Spec{RuntimeID: "slow", RequestedAt: e.clock.now}
	require.NoError(t, b.Create(ctx, spec))
	e.clock.now = spec.RequestedAt.Add(30 * time.Second)
	st, err := b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.PhaseInProgress, st.Phase)
	e.clock.now = spec.RequestedAt.Add(31 * time.Second)
	st, err = b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.PhaseFailed, st.Phase)
	assert.Contains(t, st.Reason, "0 of 1 replicas ready")
}

func TestTemplateFiles(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dir := t.TempDir()
	svc := filepath.Join(dir, "service.yaml")
	require.NoError(t, os.WriteFile(svc, []byte(`apiVersion: v1
kind: Service
metadata:
  name: {{ .Name }}-api
  labels:
    team: kyma
    {{ "kyma-project.io/runtime-id" }}: "spoofed"
spec:
  selector:
    app.kubernetes.io/name: {{ .Name }}
  ports:
  - name: http
    port: 8080
`), 0o600))
	b := e.backend(t, e.spec(map[string]any{"template_paths": map[string]any{"service": svc}}))
	spec := infrastructure.Spec{RuntimeID: "custom", RequestedAt: e.clock.now}
	require.NoError(t, b.Create(ctx, spec))
	u := e.get(t, svcGVR, "kyma-custom-api")
	assert.Equal(t, "kyma", u.GetLabels()["team"])
	assert.Equal(t, "custom", u.GetLabels()[kubernetes.LabelRuntimeID], "the backend's labels win")
	e.get(t, stsGVR, "kyma-custom") // the defaults for the others
	e.get(t, ingressGVR, "kyma-custom")

	require.NoError(t, b.Delete(ctx, spec))
	e.collectGarbage(t, "custom")
	require.Eventually(t, func() bool {
		gone, err := b.Deleted(ctx, spec)
		return err == nil && gone
	}, 10*time.Second, 100*time.Millisecond)
}

func TestSpecValidation(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("kind: {{ .Nope"), 0o600))
	kc := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
users: [{name: u, user: {token: t}}]
`), 0o600))
	base := `"kubeconfig_path": "` + kc + `", "host": "*.example.com", "image": "img"`
	for raw, want := range map[string]string{
		`{` + base + `}`:                        "spec.namespace is required",
		`{"namespace": "Bad_NS", ` + base + `}`: "spec.namespace",
		`{"namespace": "ns", "kubeconfig_path": "` + kc + `", "image": "img"}`:                       "spec.host is required",
		`{"namespace": "ns", "kubeconfig_path": "` + kc + `", "host": "http://*.x", "image": "img"}`: "not a URL",
		`{"namespace": "ns", "kubeconfig_path": "` + kc + `", "host": "*.x"}`:                        "spec.image is required",
		`{"namespace": "ns", "host": "*.x", "image": "img"}`:                                         "kubeconfig or kubeconfig_path is required",
		`{"namespace": "ns", ` + base + `, "template_paths": {"statefulset": "` + bad + `"}}`:        "spec.template_paths.statefulset",
		`{"namespace": "ns", ` + base + `, "template_paths": {"service": "/nonexistent.yaml"}}`:      "spec.template_paths.service",
		`{"namespace": "ns", ` + base + `, "template_paths": {"grpc_ingress": "x"}}`:                 `unknown field "grpc_ingress"`,
		`{"namespace": "ns", ` + base + `, "timeout_seconds": -1}`:                                   "spec.timeout_seconds",
	} {
		_, err := kubernetes.Factory(context.Background(), infrastructure.Entry{Name: "k", Type: kubernetes.Type, Spec: json.RawMessage(raw)}, infrastructure.Deps{})
		assert.ErrorContains(t, err, want, raw)
	}
	_, err := kubernetes.Factory(context.Background(), infrastructure.Entry{Name: "k", Type: kubernetes.Type, Spec: json.RawMessage(`{"namespace": "ns", ` + base + `}`)}, infrastructure.Deps{})
	assert.NoError(t, err, "no connection is made before the first call")
}
