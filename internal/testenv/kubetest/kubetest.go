// Package kubetest gives tests a real Kubernetes API server (kube-apiserver
// with etcd, as envtest runs it: no nodes, no controllers).
//
// Use it from a package's TestMain:
//
//	func TestMain(m *testing.M) { kubetest.Main(m) }
//
// and get a client configuration with RESTConfig (or the raw kubeconfig with
// Kubeconfig) and a private namespace per test with Namespace. The server is
// taken from the kubeconfig file named by KEB_TEST_KUBECONFIG (set by
// scripts/with-kube.sh and "make test"); if that is unset, Main starts a
// throwaway server with scripts/kube.sh for the lifetime of the test binary
// (building kube-apiserver first if it is not cached yet).
//
// The first use of the server in a test binary installs every CRD in
// resources/crds (create or update) and waits until each is Established, so
// tests can use Shoots, Kymas, ModuleTemplates and CompassConnections right
// away.
//
// The kubeconfig authenticates as a member of system:masters, which bypasses
// RBAC. There is no controller manager: a deleted namespace stays Terminating,
// there is no garbage collection and no default ServiceAccount.
//
// Tests that need the API server fail, never skip, when none is available.
package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"
)

// EnvKubeconfig names the environment variable holding the path of the
// kubeconfig file of the API server.
const EnvKubeconfig = "KEB_TEST_KUBECONFIG"

// CRDGVR is the resource of CustomResourceDefinitions.
var CRDGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Resources of the CRDs in resources/crds, for the dynamic client.
var (
	ShootGVR             = schema.GroupVersionResource{Group: "core.gardener.cloud", Version: "v1beta1", Resource: "shoots"}
	CompassConnectionGVR = schema.GroupVersionResource{Group: "compass.kyma-project.io", Version: "v1alpha1", Resource: "compassconnections"}
	KymaGVR              = schema.GroupVersionResource{Group: "operator.kyma-project.io", Version: "v1beta2", Resource: "kymas"}
	ModuleTemplateGVR    = schema.GroupVersionResource{Group: "operator.kyma-project.io", Version: "v1beta2", Resource: "moduletemplates"}
)

// Main runs the tests of a package against a Kubernetes API server and exits.
// If EnvKubeconfig is unset it builds (if needed) and starts a throwaway
// server first and removes it after m.Run; if it cannot, it prints why and
// exits 1.
func Main(m *testing.M) {
	os.Exit(testenv.Run(m, EnvKubeconfig, "kube-apiserver", startServer))
}

// startServer starts a server via scripts/kube.sh, exports its kubeconfig
// path in EnvKubeconfig (so subprocesses see it too) and returns a function
// stopping it.
func startServer() (func(), error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	script := filepath.Join(root, "scripts", "kube.sh")

	// Build first (minutes on a cold cache) so a failure leaves nothing behind.
	build := exec.Command("bash", script, "build")
	build.Stdout, build.Stderr = io.Discard, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("%s build: %w", script, err)
	}

	dir, err := os.MkdirTemp("/tmp", "keb-kubetest-")
	if err != nil {
		return nil, err
	}
	stopScript := func() {
		cmd := exec.Command("bash", script, "stop", dir)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "kubetest: stopping kube-apiserver in %s: %v\n", dir, err)
		}
		// stop refuses a directory that start never marked; it is empty then.
		_ = os.Remove(dir)
	}

	// With our pid, kube.sh leaves a detached reaper that stops the server if
	// this process dies without running deferred code (test timeout panic,
	// SIGKILL, Ctrl-C), even while start is still running.
	cmd := exec.Command("bash", script, "start", dir, fmt.Sprint(os.Getpid()))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		stopScript()
		return nil, fmt.Errorf("%s start: %w", script, err)
	}
	kubeconfig := strings.TrimSpace(string(out))
	if kubeconfig == "" {
		stopScript()
		return nil, fmt.Errorf("%s start printed no kubeconfig path", script)
	}

	if err := os.Setenv(EnvKubeconfig, kubeconfig); err != nil {
		stopScript()
		return nil, err
	}
	return func() {
		stopScript()
		_ = os.Unsetenv(EnvKubeconfig)
	}, nil
}

// repoRoot walks up from the working directory (a package dir under go test)
// to the directory holding go.mod.
// Kubeconfig returns the contents of the kubeconfig file of the API server,
// after checking that the server is ready and the CRDs are installed. It fails
// the test if no server is available.
func Kubeconfig(t testing.TB) []byte {
	t.Helper()
	data, cfg := load(t)
	ensureReady(t, cfg)
	return data
}

// RESTConfig returns a client configuration for the API server (admin
// rights), after checking that the server is ready and the CRDs are
// installed. Each call returns a new copy. It fails the test if no server is
// available.
func RESTConfig(t testing.TB) *rest.Config {
	t.Helper()
	_, cfg := load(t)
	ensureReady(t, cfg)
	return cfg
}

// Clientset returns a typed client for the API server.
func Clientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(RESTConfig(t))
	if err != nil {
		t.Fatalf("kubetest: clientset: %v", err)
	}
	return cs
}

// Dynamic returns a dynamic client for the API server (for the custom
// resources, see ShootGVR etc.).
func Dynamic(t testing.TB) dynamic.Interface {
	t.Helper()
	dc, err := dynamic.NewForConfig(RESTConfig(t))
	if err != nil {
		t.Fatalf("kubetest: dynamic client: %v", err)
	}
	return dc
}

// Namespace creates a uniquely named namespace and deletes it when the test
// ends. (Without a controller manager it then stays Terminating, with its
// contents, until the server is gone; names are never reused.)
func Namespace(t testing.TB) string {
	t.Helper()
	cs := Clientset(t)
	name := namespaceName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{"keb.kyma-project.io/test": "true"},
	}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("kubetest: create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("kubetest: delete namespace %s: %v", name, err)
		}
	})
	return name
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// namespaceName makes a DNS label (at most 63 characters) from the test name
// plus a random suffix, so a leftover namespace shows which test made it.
func namespaceName(testName string) string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	base := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(testName), "-"), "-")
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	if base == "" {
		base = "test"
	}
	return "kt-" + base + "-" + hex.EncodeToString(b[:])
}

// load reads the kubeconfig named by EnvKubeconfig.
func load(t testing.TB) ([]byte, *rest.Config) {
	t.Helper()
	path := os.Getenv(EnvKubeconfig)
	if path == "" {
		t.Fatalf("kubetest: %s is not set: call kubetest.Main from TestMain, or run via scripts/with-kube.sh / make test", EnvKubeconfig)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("kubetest: read kubeconfig: %v", err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		t.Fatalf("kubetest: parse kubeconfig %s: %v", path, err)
	}
	// Tests issue bursts of requests; client-side throttling only slows them.
	cfg.QPS, cfg.Burst = 200, 400
	return data, cfg
}

// Setup (readiness check + CRD installation) runs once per test binary and
// per server; its error fails every test that needs the server.
var (
	setupMu   sync.Mutex
	setupHost string // the server the setup ran against
	setupErr  error
)

func ensureReady(t testing.TB, cfg *rest.Config) {
	t.Helper()
	setupMu.Lock()
	defer setupMu.Unlock()
	if setupHost != cfg.Host {
		setupHost = cfg.Host
		setupErr = setup(cfg)
	}
	if setupErr != nil {
		t.Fatalf("kubetest: %v", setupErr)
	}
}

func setup(cfg *rest.Config) error {
	if err := waitReadyz(cfg, 30*time.Second); err != nil {
		return fmt.Errorf("kube-apiserver at %s not ready: %w", cfg.Host, err)
	}
	dir, err := crdDir()
	if err != nil {
		return err
	}
	return InstallCRDs(cfg, dir, 2*time.Minute)
}

func waitReadyz(cfg *rest.Config, timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) == "ok" {
			return true, nil
		}
		last = err
		return false, nil
	})
	if err != nil && last != nil {
		return last
	}
	return err
}

func crdDir() (string, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "resources", "crds"), nil
}

// InstallCRDs creates or updates every CustomResourceDefinition in the YAML
// files (*.yaml, *.yml; several documents per file allowed) of dir and waits
// up to timeout until each is Established. Tests normally need not call it:
// Kubeconfig, RESTConfig and Namespace install resources/crds once per test
// binary.
func InstallCRDs(cfg *rest.Config, dir string, timeout time.Duration) error {
	crds, err := readCRDs(dir)
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	client := dc.Resource(CRDGVR)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	for _, crd := range crds {
		// Test binaries sharing a server install concurrently: retry on
		// conflicts and on losing a create race.
		err := retry.OnError(retry.DefaultRetry, func(err error) bool {
			return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
		}, func() error {
			existing, err := client.Get(ctx, crd.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				_, err = client.Create(ctx, crd.DeepCopy(), metav1.CreateOptions{})
				return err
			}
			if err != nil {
				return err
			}
			upd := crd.DeepCopy()
			upd.SetResourceVersion(existing.GetResourceVersion())
			_, err = client.Update(ctx, upd, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("install CRD %s: %w", crd.GetName(), err)
		}
	}

	for _, crd := range crds {
		var last *unstructured.Unstructured
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			got, err := client.Get(ctx, crd.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			last = got
			return conditionTrue(got, "Established") && conditionTrue(got, "NamesAccepted"), nil
		})
		if err != nil {
			var conds any
			if last != nil {
				conds, _, _ = unstructured.NestedSlice(last.Object, "status", "conditions")
			}
			return fmt.Errorf("CRD %s not established (conditions: %v): %w", crd.GetName(), conds, err)
		}
	}
	return nil
}

func conditionTrue(obj *unstructured.Unstructured, condType string) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == condType && m["status"] == "True" {
			return true
		}
	}
	return false
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

func readCRDs(dir string) ([]*unstructured.Unstructured, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read CRD directory: %w", err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && (strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var crds []*unstructured.Unstructured
	for _, name := range names {
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		for i, doc := range docSeparator.Split(string(data), -1) {
			if len(bytes.TrimSpace([]byte(doc))) == 0 {
				continue
			}
			js, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				return nil, fmt.Errorf("%s (document %d): %w", path, i+1, err)
			}
			if string(js) == "null" {
				continue // only comments
			}
			obj := &unstructured.Unstructured{}
			if err := obj.UnmarshalJSON(js); err != nil {
				return nil, fmt.Errorf("%s (document %d): %w", path, i+1, err)
			}
			if gvk := obj.GroupVersionKind(); gvk.Group != CRDGVR.Group || gvk.Kind != "CustomResourceDefinition" {
				return nil, fmt.Errorf("%s (document %d): not a CustomResourceDefinition but %s", path, i+1, gvk)
			}
			crds = append(crds, obj)
		}
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CRDs found in %s", dir)
	}
	return crds, nil
}
