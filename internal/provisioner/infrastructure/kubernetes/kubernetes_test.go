package kubernetes_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/internal/seed004"
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

// pingServer stands in for the runtimes' HTTP endpoint on loopback: every request, whatever
// its host, reaches it; it answers status (503 until set to 200).
type pingServer struct {
	srv    *httptest.Server
	status atomic.Int32
	paths  chan string
}

func newPingServer(t *testing.T) *pingServer {
	p := &pingServer{paths: make(chan string, 100)}
	p.status.Store(http.StatusServiceUnavailable)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case p.paths <- r.Host + r.URL.Path:
		default:
		}
		w.WriteHeader(int(p.status.Load()))
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// client dials the ping server for any address (the runtimes' hosts have no DNS here).
func (p *pingServer) client() *http.Client {
	addr := p.srv.Listener.Addr().String()
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
}

type env struct {
	prefix string
	kc     string
	dyn    dynamic.Interface
	clock  *clock
	ping   *pingServer
}

func newEnv(t *testing.T) *env {
	kubetest.Namespace(t) // fails the test if no server is available
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	return &env{prefix: "rt-" + hex.EncodeToString(suffix), kc: string(kubetest.Kubeconfig(t)), dyn: kubetest.Dynamic(t),
		clock: &clock{now: time.Now()}, ping: newPingServer(t)}
}

func (e *env) spec(extra map[string]any) map[string]any {
	s := map[string]any{"namespace": e.prefix, "kubeconfig": e.kc, "host": "http://*.runtimes.example.com", "image": "example.com/runtime",
		"data_dir": "/data", "timeout_seconds": 60}
	for k, v := range extra {
		s[k] = v
	}
	return s
}

func (e *env) backend(t *testing.T, spec map[string]any) *kubernetes.Backend {
	t.Helper()
	raw, err := json.Marshal(spec)
	require.NoError(t, err)
	return e.backendFromJSON(t, raw)
}

func (e *env) backendFromJSON(t *testing.T, raw []byte) *kubernetes.Backend {
	t.Helper()
	var s kubernetes.Spec
	require.NoError(t, infrastructure.DecodeSpec(raw, &s))
	b, err := kubernetes.New(s, nil, kubernetes.WithNow(e.clock.Now), kubernetes.WithHTTPClient(e.ping.client()))
	require.NoError(t, err)
	return b
}

func (e *env) get(t *testing.T, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := e.dyn.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err, "%s %s/%s", gvr.Resource, ns, name)
	return u
}

// statefulSetReady plays the StatefulSet controller: all replicas ready at the current
// generation.
func (e *env) statefulSetReady(t *testing.T, ns, name string) {
	t.Helper()
	s := e.get(t, stsGVR, ns, name)
	require.NoError(t, unstructured.SetNestedMap(s.Object, map[string]any{
		"observedGeneration": s.GetGeneration(), "replicas": int64(1), "readyReplicas": int64(1),
		"currentReplicas": int64(1), "updatedReplicas": int64(1), "availableReplicas": int64(1),
	}, "status"))
	_, err := e.dyn.Resource(stsGVR).Namespace(ns).UpdateStatus(context.Background(), s, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// collectGarbage plays the garbage collector: it drops the finalizers of the runtime's objects
// that are being deleted.
func (e *env) collectGarbage(t *testing.T, ns, runtimeID string) {
	t.Helper()
	ctx := context.Background()
	for _, gvr := range []schema.GroupVersionResource{stsGVR, svcGVR, ingressGVR} {
		list, err := e.dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: kubernetes.LabelRuntimeID + "=" + runtimeID})
		require.NoError(t, err)
		for _, item := range list.Items {
			if item.GetDeletionTimestamp() == nil {
				continue
			}
			_, err := e.dyn.Resource(gvr).Namespace(ns).Patch(ctx, item.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			if !apierrors.IsNotFound(err) {
				require.NoError(t, err)
			}
		}
	}
}

func nested(t *testing.T, u *unstructured.Unstructured, path ...string) any {
	t.Helper()
	var cur any = u.Object
	for _, p := range path {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[p]
		case []any:
			require.NotEmpty(t, c, "%v", path)
			cur = c[0].(map[string]any)[p]
		default:
			t.Fatalf("%v: %T at %s", path, cur, p)
		}
	}
	return cur
}

// seedDir writes what seed 004's kubernetes example points at, relative to a working
// directory: kubeconfig.yaml (the test server's) and templates/*.yaml (the seed's own text).
func seedDir(t *testing.T, kc string) string {
	dir := t.TempDir()
	require.NoError(t, seed004.WriteExample(dir, []byte(kc)))
	return dir
}

// seedKubernetesSpec is the "kubernetes-example" entry of the seed's set, as written.
func seedKubernetesSpec(t *testing.T) json.RawMessage {
	doc, err := seed004.SetJSON()
	require.NoError(t, err)
	entries, _, err := infrastructure.LoadSet(infrastructure.Config{SetJSON: doc, Default: "kubernetes-example"})
	require.NoError(t, err)
	for _, e := range entries {
		if e.Name == "kubernetes-example" {
			return e.Spec
		}
	}
	t.Fatal("no kubernetes-example in seed 004")
	return nil
}

func TestDefaultTemplatesAreTheSeeds(t *testing.T) {
	for _, f := range []string{"statefulset", "service", "grpc_ingress", "http_ingress"} {
		want, err := seed004.Template(f)
		require.NoError(t, err)
		got, err := kubernetes.DefaultTemplate(f)
		require.NoError(t, err)
		assert.Equal(t, want, string(got), f)
	}
}

// TestSeedExample runs seed 004's kubernetes example as written (its kubeconfig_path and
// template_paths relative to the working directory, holding the seed's templates) against the
// real API server, with a ping server on loopback standing in for the runtime.
func TestSeedExample(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	t.Chdir(seedDir(t, e.kc))
	raw := seedKubernetesSpec(t)

	_, err := kubernetes.Factory(ctx, infrastructure.Entry{Name: "kubernetes-example", Type: kubernetes.Type, Spec: raw}, infrastructure.Deps{})
	require.NoError(t, err, "the seed's example is accepted as written")
	b := e.backendFromJSON(t, raw)

	id := "0f4e1c2a-5b6d-4e7f-8a9b-" + e.prefix[3:] + "3e3f4a"
	spec := infrastructure.Spec{RuntimeID: id, RequestedAt: e.clock.now, Slots: 2, Version: "0.42.1",
		Cluster: infrastructure.ClusterConfig{MachineType: "m6i.xlarge", VolumeSizeGB: 50}}
	require.NoError(t, b.Create(ctx, spec))
	require.NoError(t, b.Create(ctx, spec), "idempotent")

	ns := b.Namespace(id)
	assert.Equal(t, "cloud-runtime-"+id, ns, "the runtime's own namespace, after the seed's namespace")
	name := "kyma-" + id
	sts := e.get(t, stsGVR, ns, name)
	assert.Equal(t, "rilldata/rill:0.42.1", nested(t, sts, "spec", "template", "spec", "containers", "image"), ".Image:.ImageTag, the tag from the requested version")
	limits := nested(t, sts, "spec", "template", "spec", "containers", "resources", "limits").(map[string]any)
	assert.Equal(t, map[string]any{"cpu": "8", "memory": "32Gi"}, limits, "m6i.xlarge (4 CPU, 16 GB) x 2 slots")
	assert.Equal(t, "/mnt/data", nested(t, sts, "spec", "template", "spec", "containers", "volumeMounts", "mountPath"))
	storage := nested(t, sts, "spec", "volumeClaimTemplates", "spec", "resources", "requests", "storage")
	assert.Equal(t, "107374182400", storage, "50 GB volume x 2 slots, in bytes")
	assert.Equal(t, name, nested(t, sts, "spec", "selector", "matchLabels", "app.kubernetes.io/name"))

	svc := e.get(t, svcGVR, ns, name)
	assert.Equal(t, name, nested(t, svc, "spec", "selector", "app.kubernetes.io/name"), ".Names.StatefulSet")
	for ingress, port := range map[string]int64{name + "-http": 8080, name + "-grpc": 9090} {
		u := e.get(t, ingressGVR, ns, ingress)
		assert.Equal(t, "node-"+id+".localhost", nested(t, u, "spec", "rules", "host"), "'*' replaced by the runtime ID, without the scheme")
		backend := nested(t, u, "spec", "rules", "http", "paths", "backend", "service").(map[string]any)
		assert.Equal(t, name, backend["name"], ".Names.Service")
		assert.Equal(t, port, backend["port"].(map[string]any)["number"])
		assert.Equal(t, id, u.GetLabels()[kubernetes.LabelRuntimeID])
	}
	assert.Equal(t, "GRPC", e.get(t, ingressGVR, ns, name+"-grpc").GetAnnotations()["nginx.ingress.kubernetes.io/backend-protocol"])

	// Ready replicas first, then the ping, both within timeout_seconds (30).
	st, err := b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.PhaseInProgress, st.Phase)
	assert.Contains(t, st.Reason, "0 of 1 replicas ready")
	e.statefulSetReady(t, ns, name)
	st, err = b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.PhaseInProgress, st.Phase, "ready replicas, but the ping answers 503")
	assert.Contains(t, st.Reason, "GET http://node-"+id+".localhost/v1/ping: 503")
	assert.Equal(t, "node-"+id+".localhost/v1/ping", <-e.ping.paths)
	e.ping.status.Store(http.StatusOK)
	st, err = b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.PhaseSucceeded, st.Phase)
	assert.Equal(t, "node-"+id+".localhost", st.Domain)
	assert.Equal(t, &infrastructure.Allocation{
		Host: "http://node-" + id + ".localhost", AudienceURL: "http://node-" + id + ".localhost", CPU: 8, MemoryGB: 32,
		StorageBytes: 100 << 30, DataDir: "/mnt/data", Slots: 2, Namespace: ns,
	}, st.Allocation)

	// The ping failing past timeout_seconds fails the runtime, naming the ping.
	e.ping.status.Store(http.StatusBadGateway)
	e.clock.now = spec.RequestedAt.Add(31 * time.Second)
	st, err = b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.PhaseFailed, st.Phase)
	assert.Contains(t, st.Reason, "not ready 30s after the request: GET http://node-"+id+".localhost/v1/ping: 502")
}

func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.ping.status.Store(http.StatusOK)
	b := e.backend(t, e.spec(map[string]any{"ping_path": "/healthz"}))
	rtID := "life-" + e.prefix
	spec := infrastructure.Spec{RuntimeID: rtID, OperationID: "op-1", RequestedAt: e.clock.now}
	name := "kyma-" + rtID
	ns := b.Namespace(rtID)

	_, err := b.Status(ctx, spec)
	require.ErrorIs(t, err, infrastructure.ErrNotFound)
	require.NoError(t, b.Create(ctx, spec))

	wantLabels := map[string]string{kubernetes.LabelRuntimeID: rtID, kubernetes.LabelManagedBy: "keb"}
	for gvr, n := range map[schema.GroupVersionResource]string{stsGVR: name, svcGVR: name, ingressGVR: name + "-http"} {
		u := e.get(t, gvr, ns, n)
		for k, v := range wantLabels {
			assert.Equal(t, v, u.GetLabels()[k], "%s label %s", gvr.Resource, k)
		}
		managers := map[string]bool{}
		for _, mf := range u.GetManagedFields() {
			managers[mf.Manager] = mf.Operation == metav1.ManagedFieldsOperationApply
		}
		assert.True(t, managers[kubernetes.FieldManager], "%s applied server-side by %s: %v", gvr.Resource, kubernetes.FieldManager, managers)
	}
	sts := e.get(t, stsGVR, ns, name)
	assert.Equal(t, "example.com/runtime:latest", nested(t, sts, "spec", "template", "spec", "containers", "image"))
	limits := nested(t, sts, "spec", "template", "spec", "containers", "resources", "limits").(map[string]any)
	assert.Equal(t, map[string]any{"cpu": "1", "memory": "2Gi"}, limits, "no machine type: one slot of 1 CPU, 2 GB")

	st, err := b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.PhaseInProgress, st.Phase, "no kubelet: never ready by itself")
	e.statefulSetReady(t, ns, name)
	st, err = b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.PhaseSucceeded, st.Phase)
	assert.Equal(t, sts.GetGeneration(), st.ObservedRevision)
	assert.Equal(t, rtID+".runtimes.example.com/healthz", <-e.ping.paths, "spec.ping_path")

	// Update with the same spec changes nothing; with a new image tag the generation moves on.
	rev, err := b.Update(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, sts.GetGeneration(), rev)
	b2 := e.backend(t, e.spec(map[string]any{"image_tag": "2"}))
	rev2, err := b2.Update(ctx, spec)
	require.NoError(t, err)
	assert.Greater(t, rev2, rev)
	st, err = b2.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.PhaseInProgress, st.Phase, "the new generation is not observed yet")
	e.statefulSetReady(t, ns, name)
	st, err = b2.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.PhaseSucceeded, st.Phase)
	assert.Equal(t, rev2, st.ObservedRevision)

	assert.ErrorIs(t, b.Hibernate(ctx, spec), infrastructure.ErrNotSupported)

	unknown := spec
	unknown.Cluster.MachineType = "quantum-9000"
	assert.ErrorContains(t, b.Create(ctx, unknown), `machine type "quantum-9000" has no known size: add it to spec.machine_types`)

	// An object of the runtime where runtimes lived before they had namespaces of their own.
	_, err = kubetest.Clientset(t).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.prefix}}, metav1.CreateOptions{})
	require.NoError(t, err)
	legacy := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{
		"name": name, "namespace": e.prefix, "labels": map[string]any{kubernetes.LabelRuntimeID: rtID, kubernetes.LabelManagedBy: "keb"}},
		"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80)}}}}}
	_, err = e.dyn.Resource(svcGVR).Namespace(e.prefix).Create(ctx, legacy, metav1.CreateOptions{})
	require.NoError(t, err)

	gone, err := b.Deleted(ctx, spec)
	require.NoError(t, err)
	assert.False(t, gone)
	require.NoError(t, b.Delete(ctx, spec))
	require.NoError(t, b.Delete(ctx, spec), "deleting again is fine")
	u := e.get(t, stsGVR, ns, name)
	assert.NotNil(t, u.GetDeletionTimestamp(), "foreground deletion waits for the garbage collector")
	assert.Contains(t, u.GetFinalizers(), metav1.FinalizerDeleteDependents)
	gone, err = b.Deleted(ctx, spec)
	require.NoError(t, err)
	assert.False(t, gone)

	e.collectGarbage(t, ns, rtID)
	gone, err = b.Deleted(ctx, spec)
	require.NoError(t, err)
	assert.False(t, gone, "the legacy object is still being deleted")
	e.collectGarbage(t, e.prefix, rtID)
	require.Eventually(t, func() bool {
		gone, err := b.Deleted(ctx, spec)
		return err == nil && gone
	}, 10*time.Second, 100*time.Millisecond)
	_, err = e.dyn.Resource(stsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "StatefulSet deleted")
	_, err = e.dyn.Resource(svcGVR).Namespace(e.prefix).Get(ctx, name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the legacy Service deleted")
	require.NoError(t, b.Delete(ctx, spec), "deleting a deleted runtime is fine")
	_, err = b.Status(ctx, spec)
	assert.ErrorIs(t, err, infrastructure.ErrNotFound)
}

// TestScopedCredentials: a runtime's kubeconfig is a ServiceAccount of its own namespace:
// it can work there, not in another runtime's namespace nor cluster-wide; a binding's account
// works likewise until it is revoked.
func TestScopedCredentials(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	b := e.backend(t, e.spec(nil))
	a := infrastructure.Spec{RuntimeID: "a-" + e.prefix, RequestedAt: e.clock.now}
	other := infrastructure.Spec{RuntimeID: "b-" + e.prefix, RequestedAt: e.clock.now}
	require.NoError(t, b.Create(ctx, a))
	require.NoError(t, b.Create(ctx, other))

	kc, err := b.Kubeconfig(ctx, a)
	require.NoError(t, err)
	assert.NotContains(t, kc, strings.TrimSpace(e.kc), "not the host cluster's credentials")
	client := clientFor(t, kc)
	_, err = client.CoreV1().ConfigMaps(b.Namespace(a.RuntimeID)).List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "its own namespace")
	_, err = client.AppsV1().StatefulSets(b.Namespace(a.RuntimeID)).Get(ctx, "kyma-"+a.RuntimeID, metav1.GetOptions{})
	require.NoError(t, err, "its own workload")
	_, err = client.CoreV1().ConfigMaps(b.Namespace(other.RuntimeID)).List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "another runtime's namespace: %v", err)
	_, err = client.AppsV1().StatefulSets(b.Namespace(other.RuntimeID)).Get(ctx, "kyma-"+other.RuntimeID, metav1.GetOptions{})
	assert.True(t, apierrors.IsForbidden(err), "another runtime's workload: %v", err)
	_, err = client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "cluster-wide: %v", err)
	cfg, err := clientcmd.Load([]byte(kc))
	require.NoError(t, err)
	assert.Equal(t, b.Namespace(a.RuntimeID), cfg.Contexts[cfg.CurrentContext].Namespace)

	// A binding's own account: works, then is revoked.
	creds, err := b.IssueCredentials(ctx, a, "binding-1", 15*time.Minute)
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(15*time.Minute), creds.ExpiresAt, time.Minute)
	bc := clientFor(t, creds.Kubeconfig)
	_, err = bc.CoreV1().ConfigMaps(b.Namespace(a.RuntimeID)).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	_, err = bc.CoreV1().ConfigMaps(b.Namespace(other.RuntimeID)).List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	require.NoError(t, b.RevokeCredentials(ctx, a, "binding-1"))
	require.NoError(t, b.RevokeCredentials(ctx, a, "binding-1"), "revoking again is fine")
	_, err = bc.CoreV1().ConfigMaps(b.Namespace(a.RuntimeID)).List(ctx, metav1.ListOptions{})
	assert.True(t, denied(err), "a revoked account is refused at once (its RoleBinding is gone): %v", err)
	// The API server caches a token's authentication for a few seconds; then the token itself
	// is refused, its ServiceAccount being gone.
	require.Eventually(t, func() bool {
		_, err := bc.CoreV1().ConfigMaps(b.Namespace(a.RuntimeID)).List(ctx, metav1.ListOptions{})
		return apierrors.IsUnauthorized(err)
	}, 30*time.Second, 250*time.Millisecond, "a revoked token is refused")
	_, err = client.CoreV1().ConfigMaps(b.Namespace(a.RuntimeID)).List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "the runtime's own account is untouched")

	// Deleting the runtime revokes its own account.
	require.NoError(t, b.Delete(ctx, a))
	_, err = client.CoreV1().ConfigMaps(b.Namespace(a.RuntimeID)).List(ctx, metav1.ListOptions{})
	assert.True(t, denied(err), "a deleted runtime's account is refused: %v", err)
}

// TestIssuedCredentialsWorkAtOnce: the API server learns of a new ServiceAccount and
// RoleBinding through caches; credentials are handed out only once it honours them, so their
// first request succeeds. (CI once saw a binding's first request refused under load; the
// scoped package's tests pin the wait itself.)
func TestIssuedCredentialsWorkAtOnce(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	b := e.backend(t, e.spec(nil))
	a := infrastructure.Spec{RuntimeID: "a-" + e.prefix, RequestedAt: e.clock.now}
	require.NoError(t, b.Create(ctx, a))
	// Concurrent issuers keep the API server's caches busy, as a fleet's bindings would.
	const accounts, issuers = 60, 6
	errs := make(chan error, accounts)
	next := make(chan int, accounts)
	for i := 0; i < accounts; i++ {
		next <- i
	}
	close(next)
	for w := 0; w < issuers; w++ {
		go func() {
			for i := range next {
				creds, err := b.IssueCredentials(ctx, a, fmt.Sprintf("binding-%d", i), 15*time.Minute)
				if err == nil {
					var c k8s.Interface
					if c, err = k8s.NewForConfig(restConfig(t, creds.Kubeconfig)); err == nil {
						_, err = c.CoreV1().ConfigMaps(b.Namespace(a.RuntimeID)).List(ctx, metav1.ListOptions{})
					}
				}
				if err != nil {
					err = fmt.Errorf("account %d on first use: %w", i, err)
				}
				errs <- err
			}
		}()
	}
	for i := 0; i < accounts; i++ {
		assert.NoError(t, <-errs)
	}
}

// denied: the API server refuses the request, whether it still authenticates the token
// (Forbidden: no RoleBinding) or no longer does (Unauthorized).
func denied(err error) bool { return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) }

func restConfig(t *testing.T, kubeconfig string) *rest.Config {
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	if err != nil {
		t.Errorf("reading an issued kubeconfig: %v", err)
		return &rest.Config{}
	}
	return cfg
}

func clientFor(t *testing.T, kubeconfig string) k8s.Interface {
	t.Helper()
	c, err := k8s.NewForConfig(restConfig(t, kubeconfig))
	require.NoError(t, err)
	return c
}

func TestTemplateFiles(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dir := t.TempDir()
	svc := filepath.Join(dir, "service.yaml")
	require.NoError(t, os.WriteFile(svc, []byte(`apiVersion: v1
kind: Service
metadata:
  name: {{ .Names.Service }}-api
  labels:
    team: kyma
    {{ "kyma-project.io/runtime-id" }}: "spoofed"
spec:
  selector:
    app.kubernetes.io/name: {{ .Names.StatefulSet }}
  ports:
  - name: http
    port: {{ .Slots }}8080
`), 0o600))
	b := e.backend(t, e.spec(map[string]any{"template_paths": map[string]any{"service": svc}}))
	spec := infrastructure.Spec{RuntimeID: "custom", RequestedAt: e.clock.now}
	require.NoError(t, b.Create(ctx, spec))
	ns := b.Namespace("custom")
	u := e.get(t, svcGVR, ns, "kyma-custom-api")
	assert.Equal(t, "kyma", u.GetLabels()["team"])
	assert.Equal(t, "custom", u.GetLabels()[kubernetes.LabelRuntimeID], "the backend's labels win")
	assert.Equal(t, int64(18080), nested(t, u, "spec", "ports", "port"))
	e.get(t, stsGVR, ns, "kyma-custom") // the defaults for the others
	e.get(t, ingressGVR, ns, "kyma-custom-http")
	e.get(t, ingressGVR, ns, "kyma-custom-grpc")

	require.NoError(t, b.Delete(ctx, spec))
	e.collectGarbage(t, ns, "custom")
	require.Eventually(t, func() bool {
		gone, err := b.Deleted(ctx, spec)
		return err == nil && gone
	}, 10*time.Second, 100*time.Millisecond)
}

func TestMachineSizes(t *testing.T) {
	for mt, want := range map[string]kubernetes.MachineSize{
		"Standard_D4s_v5": {CPU: 4, MemoryGB: 16}, "Standard_D2s_v5": {CPU: 2, MemoryGB: 8},
		"m6i.large": {CPU: 2, MemoryGB: 8}, "m6i.xlarge": {CPU: 4, MemoryGB: 16}, "m6i.4xlarge": {CPU: 16, MemoryGB: 64},
		"c5.2xlarge": {CPU: 8, MemoryGB: 16}, "n2-standard-4": {CPU: 4, MemoryGB: 16}, "n2-highmem-2": {CPU: 2, MemoryGB: 16},
		"g_c4_m16": {CPU: 4, MemoryGB: 16},
	} {
		got, ok := kubernetes.KnownMachineSize(mt)
		assert.True(t, ok, mt)
		assert.Equal(t, want, got, mt)
	}
	for _, mt := range []string{"", "weird", "m6i.3large", "Standard_D0s_v5"} {
		_, ok := kubernetes.KnownMachineSize(mt)
		assert.False(t, ok, mt)
	}
}

func TestSpecValidation(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("kind: {{ .Nope"), 0o600))
	kc := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(seed004.UnreachableKubeconfig), 0o600))
	base := `"kubeconfig_path": "` + kc + `", "host": "http://node-*.localhost", "image": "img", "data_dir": "/mnt/data"`
	for raw, want := range map[string]string{
		`{` + base + `}`:                        "spec.namespace is required",
		`{"namespace": "Bad_NS", ` + base + `}`: "spec.namespace",
		`{"namespace": "ns", "kubeconfig_path": "` + kc + `", "image": "img", "data_dir": "/d"}`:                            "spec.host is required",
		`{"namespace": "ns", "kubeconfig_path": "` + kc + `", "host": "ftp://*.x", "image": "img", "data_dir": "/d"}`:       "spec.host",
		`{"namespace": "ns", "kubeconfig_path": "` + kc + `", "host": "http://*.x/path", "image": "img", "data_dir": "/d"}`: "scheme and host only",
		`{"namespace": "ns", "kubeconfig_path": "` + kc + `", "host": "*.x", "data_dir": "/d"}`:                             "spec.image is required",
		`{"namespace": "ns", "kubeconfig_path": "` + kc + `", "host": "*.x", "image": "img:1", "data_dir": "/d"}`:           "spec.image \"img:1\" carries a tag",
		`{"namespace": "ns", "kubeconfig_path": "` + kc + `", "host": "*.x", "image": "img"}`:                               "spec.data_dir is required",
		`{"namespace": "ns", "host": "*.x", "image": "img", "data_dir": "/d"}`:                                              "kubeconfig or kubeconfig_path is required",
		`{"namespace": "ns", ` + base + `, "template_paths": {"statefulset": "` + bad + `"}}`:                               "spec.template_paths.statefulset",
		`{"namespace": "ns", ` + base + `, "template_paths": {"grpc_ingress": "/nonexistent.yaml"}}`:                        "spec.template_paths.grpc_ingress",
		`{"namespace": "ns", ` + base + `, "template_paths": {"tcp_ingress": "x"}}`:                                         `unknown field "tcp_ingress"`,
		`{"namespace": "ns", ` + base + `, "timeout_seconds": -1}`:                                                          "spec.timeout_seconds",
		`{"namespace": "ns", ` + base + `, "token_expiration_seconds": 60}`:                                                 "spec.token_expiration_seconds must be at least 600",
		`{"namespace": "ns", ` + base + `, "ping_path": "v1/ping"}`:                                                         "spec.ping_path",
		`{"namespace": "ns", ` + base + `, "machine_types": {"big": {"cpu": 0, "memory_gb": 1}}}`:                           `spec.machine_types["big"]`,
	} {
		_, err := kubernetes.Factory(context.Background(), infrastructure.Entry{Name: "k", Type: kubernetes.Type, Spec: json.RawMessage(raw)}, infrastructure.Deps{})
		assert.ErrorContains(t, err, want, raw)
	}
	_, err := kubernetes.Factory(context.Background(), infrastructure.Entry{Name: "k", Type: kubernetes.Type, Spec: json.RawMessage(`{"namespace": "ns", ` + base + `}`)}, infrastructure.Deps{})
	assert.NoError(t, err, "no connection is made before the first call")
}
