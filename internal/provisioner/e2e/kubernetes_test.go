package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/kubernetes"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/provisionertest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
)

var stsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}

// seedKubernetesSet is seed 004's kubernetes example exactly as the seed writes it (with its
// comments), but for the host's port: the runtimes' ping answers on a loopback port here.
func seedKubernetesSet(t *testing.T, port int) string {
	raw, err := os.ReadFile("../infrastructure/internal/seed004/seed_004.txt")
	require.NoError(t, err)
	text := string(raw)
	start := strings.Index(text, "```\n{") + 4
	doc := text[start : start+strings.Index(text[start:], "```")]
	require.Contains(t, doc, `"host": "http://node-*.localhost",`)
	return strings.Replace(doc, `"host": "http://node-*.localhost",`, `"host": "http://node-*.localhost:`+strconv.Itoa(port)+`",`, 1)
}

// TestSeedKubernetesRuntime provisions a runtime through the provisioner with seed 004's
// kubernetes example and templates (the files it names, relative to the working directory)
// on the real API server, a ping server on loopback standing in for the runtime: the runtime is
// ready once its StatefulSet is and its /v1/ping answers, runtimeStatus shows its allocation
// sized by the machine type and slots, and deprovisioning removes it.
func TestSeedKubernetesRuntime(t *testing.T) {
	ctx := context.Background()
	kc := kubetest.Kubeconfig(t)
	dyn := kubetest.Dynamic(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kubeconfig.yaml"), kc, 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "templates"), 0o700))
	for _, f := range []string{"statefulset", "service", "grpc_ingress", "http_ingress"} {
		text, err := kubernetes.DefaultTemplate(f) // the seed's own text (checked in the backend's tests)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", f+".yaml"), text, 0o600))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	pings := make(chan string, 100)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case pings <- r.Host + r.URL.Path:
		default:
		}
	}), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	set := seedKubernetesSet(t, port)
	t.Chdir(dir)

	p := provisionertest.New(t, provisionertest.Options{Backends: infrastructure.Config{SetJSON: set, Default: "kubernetes-example"}, Clusters: runtimeclient.Clusters{}})
	svc := p.Provisioner.Service
	in := input("seed-k8s")
	st, err := svc.ProvisionRuntime(ctx, tenant, in)
	require.NoError(t, err)
	id := *st.RuntimeID
	ns, name := "cloud-runtime-"+id, "kyma-"+id

	// Play the StatefulSet controller once the provisioner has applied it.
	var sts *unstructured.Unstructured
	require.Eventually(t, func() bool {
		sts, err = dyn.Resource(stsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil
	}, 30*time.Second, 50*time.Millisecond)
	require.NoError(t, unstructured.SetNestedMap(sts.Object, map[string]any{
		"observedGeneration": sts.GetGeneration(), "replicas": int64(1), "readyReplicas": int64(1),
	}, "status"))
	_, err = dyn.Resource(stsGVR).Namespace(ns).UpdateStatus(ctx, sts, metav1.UpdateOptions{})
	require.NoError(t, err)
	wait(t, svc, *st.ID, gqlschema.OperationStateSucceeded)
	assert.Equal(t, "node-"+id+".localhost:"+strconv.Itoa(port)+"/v1/ping", <-pings, "readiness asked the runtime's /v1/ping")

	image, _, _ := unstructured.NestedSlice(sts.Object, "spec", "template", "spec", "containers")
	assert.Equal(t, "rilldata/rill:2.20.0", image[0].(map[string]any)["image"], "the tag is the requested version")

	status, err := svc.RuntimeStatus(ctx, tenant, id)
	require.NoError(t, err)
	a := status.RuntimeConfiguration.Allocation
	require.NotNil(t, a)
	raw, err := json.Marshal(a)
	require.NoError(t, err)
	url := "http://node-" + id + ".localhost:" + strconv.Itoa(port)
	assert.JSONEq(t, `{"host": "`+url+`", "audienceURL": "`+url+`", "cpu": 12, "memoryGB": 48, "storageBytes": 161061273600,
		"dataDir": "/mnt/data", "slots": 3, "namespace": "`+ns+`"}`, string(raw), "n2-standard-4 (4 CPU, 16 GB) and 50 GB x 3 slots (autoScalerMin)")
	require.NotNil(t, status.RuntimeConfiguration.Kubeconfig)
	assert.NotEqual(t, string(kc), *status.RuntimeConfiguration.Kubeconfig, "the runtime's own credentials")

	opID, err := svc.DeprovisionRuntime(ctx, tenant, id)
	require.NoError(t, err)
	collectGarbage(t, ctx, dyn, ns, id)
	wait(t, svc, opID, gqlschema.OperationStateSucceeded)
	_, err = dyn.Resource(stsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
}

// collectGarbage plays the garbage collector until the runtime's objects are gone: it drops the
// finalizers of those being deleted.
func collectGarbage(t *testing.T, ctx context.Context, dyn dynamic.Interface, ns, runtimeID string) {
	t.Helper()
	gvrs := []schema.GroupVersionResource{stsGVR, {Version: "v1", Resource: "services"}, {Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}}
	require.Eventually(t, func() bool {
		left := 0
		for _, gvr := range gvrs {
			list, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: kubernetes.LabelRuntimeID + "=" + runtimeID})
			if err != nil {
				return false
			}
			for _, item := range list.Items {
				left++
				if item.GetDeletionTimestamp() != nil {
					_, _ = dyn.Resource(gvr).Namespace(ns).Patch(ctx, item.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
				}
			}
		}
		return left == 0
	}, 30*time.Second, 50*time.Millisecond)
}
