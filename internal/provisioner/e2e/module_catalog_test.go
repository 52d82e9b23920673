package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/module/moduletest"
	"github.com/kyma-project/kyma-environment-broker/internal/modulemanager"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/kubernetes"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/provisionertest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/provisionertest/gardenersim"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

var (
	configMapGVR   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	templateGVR    = schema.GroupVersionResource{Group: "operator.kyma-project.io", Version: "v1beta2", Resource: "moduletemplates"}
	releaseMetaGVR = schema.GroupVersionResource{Group: "operator.kyma-project.io", Version: "v1beta2", Resource: "modulereleasemetas"}
)

// buildBinary builds ./pkg of the repository into the test's directory.
func buildBinary(t *testing.T, pkg string) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, "./"+pkg)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build %s: %s", pkg, out)
	return bin
}

// catalog is a module catalog made as a module developer makes one: with the kyma binary, keys,
// modules created, signed and pushed to a real registry, and their templates written into Dir.
type catalog struct {
	t    *testing.T
	kyma string
	work string
	env  []string
	reg  *moduletest.Registry
	// Dir is APP_MODULE_CATALOG_DIR; PublicKeys is APP_MODULE_PUBLIC_KEYS_FILE (key.pem's).
	Dir, PublicKeys string
}

func newCatalog(t *testing.T, reg *moduletest.Registry) *catalog {
	c := &catalog{t: t, kyma: buildBinary(t, "cmd/kyma"), work: t.TempDir(), reg: reg}
	// An empty docker config: the CLI's credentials are the ones the test gives.
	c.env = append(os.Environ(), "DOCKER_CONFIG="+t.TempDir())
	c.Dir = filepath.Join(c.work, "catalog")
	require.NoError(t, os.Mkdir(c.Dir, 0o700))
	c.run("alpha", "create", "key", "--private-key", "key.pem", "--public-key", "pub.pem", "--bits", "2048")
	c.run("alpha", "create", "key", "--private-key", "other.pem", "--public-key", "other-pub.pem", "--bits", "2048")
	c.PublicKeys = filepath.Join(c.work, "pub.pem")
	return c
}

func (c *catalog) run(args ...string) string {
	c.t.Helper()
	cmd := exec.Command(c.kyma, args...)
	cmd.Dir, cmd.Env = c.work, c.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(c.t, cmd.Run(), "kyma %s: %s%s", strings.Join(args, " "), out.String(), errOut.String())
	return out.String()
}

func (c *catalog) registryFlags() []string {
	flags := []string{"--registry", c.reg.Addr, "--insecure"}
	if c.reg.Username != "" {
		flags = append(flags, "-c", c.reg.Username+":"+c.reg.Password)
	}
	return flags
}

// publish creates module name:version from files, signs it with key (a file in the work
// directory), pushes it and writes its release meta and template into the catalog.
func (c *catalog) publish(name, version string, files map[string]string, key string) {
	c.t.Helper()
	src := filepath.Join(c.work, "src-"+name+"-"+version)
	moduletest.WriteFiles(c.t, src, files, moduletest.Paths(files), 0o644)
	c.run(append([]string{"alpha", "create", "module", "--module-config-file", filepath.Join(src, "module-config.yaml"), "--key", key, "-o", filepath.Join(src, "template.yaml")}, c.registryFlags()...)...)
	c.run(append([]string{"alpha", "template", "module", "kyma-project.io/module/" + name + ":" + version, "-o", filepath.Join(c.Dir, name+".yaml")}, c.registryFlags()...)...)
}

// brokerBinary runs cmd/broker as users run it (APP_* variables only, SQLite in its working
// directory, the embedded sandbox for the external systems) until the test ends.
func startBrokerBinary(t *testing.T, env ...string) (*bt.Broker, *testenv.SyncBuffer) {
	t.Helper()
	bin := buildBinary(t, "cmd/broker")
	dir := t.TempDir()
	port, sandboxPort := freePort(t), freePort(t)
	logs := &testenv.SyncBuffer{}
	cmd := exec.Command(bin)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logs, logs
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(),
		"APP_PORT=" + strconv.Itoa(port), "APP_SANDBOX_ADDRESS=127.0.0.1:" + strconv.Itoa(sandboxPort), "APP_SANDBOX_TLS_ADDRESS=127.0.0.1:0",
		"APP_BROKER_USERNAME=" + bt.Username, "APP_BROKER_PASSWORD=" + bt.Password, "APP_BROKER_POLL_INTERVAL=200ms",
	}, env...)
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("the broker's log:\n%s", tail(logs.String(), 60))
		}
	})
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(time.Minute)
	for {
		if resp, err := http.Get(url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-exited:
			t.Fatalf("the broker exited at start:\n%s", tail(logs.String(), 60))
		case <-time.After(50 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "the broker did not start:\n%s", tail(logs.String(), 60))
	}
	b := bt.Remote(t, url)
	b.Client.Timeout = time.Minute
	return b, logs
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// provisionWithModules provisions an instance through OSB with modules.list naming modules and
// waits for the operation's end. Every instance is of one global account, which keeps one
// account of the simulator's pool (a deprovisioned one's account is dirty until cleaned).
func provisionWithModules(t *testing.T, b *bt.Broker, modules ...string) (string, bt.LastOperation) {
	t.Helper()
	id := uuid.NewString()
	list := make([]map[string]any, 0, len(modules))
	for _, m := range modules {
		list = append(list, map[string]any{"name": m})
	}
	params := bt.AWSParams("rt-" + id[:8])
	params["modules"] = map[string]any{"list": list}
	prov := b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, params, bt.SAPContext("ga-module-catalog", "sa-"+id[:8])))
	require.Equal(t, http.StatusAccepted, prov.Status, prov.String())
	return id, b.WaitForLastOperation(id, prov.Operation(), 3*time.Minute)
}

// moduleObjects are the names of the objects of resource gvr in ns the module manager applied
// for module, sorted.
func moduleObjects(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, module string) []string {
	t.Helper()
	list, err := dyn.Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: modulemanager.LabelManagedBy + "=" + modulemanager.ManagedBy + "," + modulemanager.LabelModule + "=" + module,
	})
	require.NoError(t, err)
	var out []string
	for _, it := range list.Items {
		// The manager's own bookkeeping (its inventory ConfigMap) is not the module's.
		if !strings.HasSuffix(it.GetName(), "-module-inventory") {
			out = append(out, it.GetName())
		}
	}
	sort.Strings(out)
	return out
}

// moduleStatuses are the Kyma resource's status.modules.
func moduleStatuses(t *testing.T, dyn dynamic.Interface, ns string) []map[string]any {
	t.Helper()
	k, err := dyn.Resource(kymaGVR).Namespace(ns).Get(context.Background(), runtimeclient.KymaName, metav1.GetOptions{})
	require.NoError(t, err)
	mods, _ := k.Object["status"].(map[string]any)["modules"].([]any)
	out := make([]map[string]any, 0, len(mods))
	for _, m := range mods {
		out = append(out, m.(map[string]any))
	}
	return out
}

// TestModuleCatalogThroughOSB: the broker binary, configured as users configure it
// (APP_MODULE_CATALOG_DIR, APP_MODULE_PUBLIC_KEYS_FILE, APP_MODULE_PLAIN_HTTP_REGISTRIES and,
// the registry requiring basic auth, APP_MODULE_REGISTRY_CREDENTIALS_FILE), with
// the gardener backend on the simulator whose runtimes are this kube-apiserver: an OSB
// provisioning with modules.list naming a module signed with the configured key ends with the
// module's manifest installed in the runtime, once; a module signed with another key, and a
// module the catalog lacks, fail the provisioning naming the module; deprovisioning removes the
// module. The registry's password is neither logged nor written into the runtime.
func TestModuleCatalogThroughOSB(t *testing.T) {
	ctx := context.Background()
	dyn := kubetest.Dynamic(t)
	reg := moduletest.Start(t, moduletest.Options{Auth: true})
	cat := newCatalog(t, reg)
	creds := filepath.Join(t.TempDir(), "config.json")
	auth := base64.StdEncoding.EncodeToString([]byte(reg.Username + ":" + reg.Password))
	require.NoError(t, os.WriteFile(creds, []byte(`{"auths": {"`+reg.Addr+`": {"auth": "`+auth+`"}}}`), 0o600))
	ns := kubetest.Namespace(t) // where the module's manifest puts its objects
	cat.publish("sampler", "1.0.0", moduletest.InstallableFiles("sampler", "1.0.0", "regular", ns), "key.pem")
	cat.publish("forged", "1.0.0", moduletest.InstallableFiles("forged", "1.0.0", "regular", ns), "other.pem")
	moduletest.RunSampleOperator(t, dyn, "sampler", ns)

	sim := gardenersim.StartSim(t, gardenersim.Options{PlayAgent: true, ModuleManager: true})
	b, logs := startBrokerBinary(t,
		fmt.Sprintf(`APP_PROVISIONER_SET_JSON={"gardener": {"type": "gardener", "spec": {"project": %q, "kubeconfig": %q}}}`, sim.Project, string(sim.Kubeconfig)),
		"APP_RECONCILER_DISABLED=true", // the provisioner installs Kyma
		"APP_MODULE_CATALOG_DIR="+cat.Dir, "APP_MODULE_PUBLIC_KEYS_FILE="+cat.PublicKeys, "APP_MODULE_PLAIN_HTTP_REGISTRIES="+reg.Addr,
		"APP_MODULE_REGISTRY_CREDENTIALS_FILE="+creds,
	)

	id, lo := provisionWithModules(t, b, "sampler")
	require.Equal(t, domain.Succeeded, lo.State, lo.Description)
	assert.Equal(t, []string{"sampler-operator", "sampler-v1.0.0"}, moduleObjects(t, dyn, configMapGVR, ns, "sampler"), "the manifest's ConfigMaps, once")
	assert.Equal(t, []string{"sampler"}, moduleObjects(t, dyn, moduletest.OperatorGVR("sampler"), ns, "sampler"), "the default CR, once")
	st := moduleStatuses(t, dyn, runtimeclient.KymaNamespace)
	require.Len(t, st, 1, "%v", st)
	assert.Equal(t, "sampler", st[0]["name"])
	assert.Equal(t, "Ready", st[0]["state"])
	assert.Equal(t, "1.0.0", st[0]["version"])
	_, err := dyn.Resource(templateGVR).Namespace(runtimeclient.KymaNamespace).Get(ctx, "sampler-1.0.0", metav1.GetOptions{})
	assert.NoError(t, err, "the catalog's template is in the runtime")
	_, err = dyn.Resource(templateGVR).Namespace(runtimeclient.KymaNamespace).Get(ctx, "forged-1.0.0", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "only the requested modules' templates: %v", err)
	for _, n := range []string{runtimeclient.KymaNamespace, ns} {
		secrets, err := kubetest.Clientset(t).CoreV1().Secrets(n).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, sec := range secrets.Items {
			for k, v := range sec.Data {
				assert.NotContains(t, string(v), reg.Password, "Secret %s/%s %s", n, sec.Name, k)
				assert.NotContains(t, string(v), auth, "Secret %s/%s %s", n, sec.Name, k)
			}
		}
	}

	// Deprovisioning removes the module (the gardener runtimes of this test share one API
	// server, so the next runtime starts from a clean kyma-system).
	del := b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID))
	require.Equal(t, http.StatusAccepted, del.Status, del.String())
	lo = b.WaitForLastOperation(id, del.Operation(), 3*time.Minute)
	require.Equal(t, domain.Succeeded, lo.State, lo.Description)
	assert.Empty(t, moduleObjects(t, dyn, configMapGVR, ns, "sampler"), "the module is removed with its runtime")
	_, err = dyn.Resource(templateGVR).Namespace(runtimeclient.KymaNamespace).Get(ctx, "sampler-1.0.0", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the catalog's copy goes with the runtime: %v", err)
	_, err = dyn.Resource(kymaGVR).Namespace(runtimeclient.KymaNamespace).Get(ctx, runtimeclient.KymaName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the Kyma resource is gone: %v", err)

	forged, lo := provisionWithModules(t, b, "forged")
	require.Equal(t, domain.Failed, lo.State, lo.Description)
	assert.Contains(t, lo.Description, "module forged")
	assert.Contains(t, lo.Description, "no signature verifies with a configured key")
	assert.Empty(t, moduleObjects(t, dyn, configMapGVR, ns, "forged"), "nothing of a module that does not verify is applied")

	nosuch, lo := provisionWithModules(t, b, "nosuch")
	require.Equal(t, domain.Failed, lo.State, lo.Description)
	assert.Contains(t, lo.Description, "the module catalog has no template of the module: nosuch")

	// Deprovisioning the failed instances leaves no Kyma resource behind (the module manager's
	// finalizer is removed with the modules).
	for _, id := range []string{forged, nosuch} {
		del := b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID))
		require.Equal(t, http.StatusAccepted, del.Status, del.String())
		lo = b.WaitForLastOperation(id, del.Operation(), 3*time.Minute)
		require.Equal(t, domain.Succeeded, lo.State, lo.Description)
	}
	_, err = dyn.Resource(kymaGVR).Namespace(runtimeclient.KymaNamespace).Get(ctx, runtimeclient.KymaName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the Kyma resource is gone: %v", err)
	assert.NotContains(t, logs.String(), reg.Password)
	assert.NotContains(t, logs.String(), auth)
}

// confinedModuleFiles are a module a runtime confined to its namespace can install: its manifest
// has only namespaced objects that name no namespace (the manager puts them into the Kyma
// namespace), no CRD and no default CR.
func confinedModuleFiles(name, version string) map[string]string {
	return map[string]string{
		"module-config.yaml": fmt.Sprintf("name: kyma-project.io/module/%s\nversion: %s\nchannel: regular\nmanifest: manifest.yaml\n", name, version),
		"manifest.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "-config\ndata:\n  version: \"" + version + "\"\n" +
			"---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: " + name + "-operator\n",
	}
}

// TestKubernetesRuntimeInstallsModules: on the kubernetes backend a runtime is a namespace of
// the host cluster and its kubeconfig reaches only that namespace; with a module catalog the
// provisioner installs the runtime's requested modules there, through that kubeconfig: the
// namespace is the runtime's Kyma namespace (Kyma resource, release metas, templates, the
// manifest's objects). The runtime's kubeconfig still reaches nothing else (not kyma-system),
// a module the catalog lacks fails naming it, and deprovisioning removes the modules.
func TestKubernetesRuntimeInstallsModules(t *testing.T) {
	ctx := context.Background()
	kc := kubetest.Kubeconfig(t)
	dyn := kubetest.Dynamic(t)
	reg := moduletest.Start(t, moduletest.Options{})
	cat := newCatalog(t, reg)
	cat.publish("confined", "1.0.0", confinedModuleFiles("confined", "1.0.0"), "key.pem")
	modules, err := runtimeclient.LoadModules(runtimeclient.ModuleSettings{CatalogDir: cat.Dir, PublicKeysFile: cat.PublicKeys, PlainHTTPRegistries: []string{reg.Addr}}, logrus.New())
	require.NoError(t, err)

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kubeconfig.yaml"), kc, 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "templates"), 0o700))
	for _, f := range []string{"statefulset", "service", "grpc_ingress", "http_ingress"} {
		text, err := kubernetes.DefaultTemplate(f)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", f+".yaml"), text, 0o600))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	set := seedKubernetesSet(t, ln.Addr().(*net.TCPAddr).Port)
	t.Chdir(dir)
	p := provisionertest.New(t, provisionertest.Options{Backends: infrastructure.Config{SetJSON: set, Default: "kubernetes-example"}, Clusters: runtimeclient.Clusters{Modules: modules}})
	svc := p.Provisioner.Service

	provision := func(name string, modules ...string) (string, string, string) {
		in := input(name)
		in.KymaConfig.Components = nil
		for _, m := range modules {
			in.KymaConfig.Components = append(in.KymaConfig.Components, &gqlschema.ComponentConfigurationInput{Component: m, Namespace: "kyma-system"})
		}
		st, err := svc.ProvisionRuntime(ctx, tenant, in)
		require.NoError(t, err)
		id := *st.RuntimeID
		ns, sts := "cloud-runtime-"+id, "kyma-"+id
		playStatefulSet(t, dyn, ns, sts)
		return *st.ID, id, ns
	}

	opID, id, ns := provision("k8s-modules", "confined")
	wait(t, svc, opID, gqlschema.OperationStateSucceeded)
	assert.Equal(t, []string{"confined-config"}, moduleObjects(t, dyn, configMapGVR, ns, "confined"), "the manifest's ConfigMap, once, in the runtime's namespace")
	assert.Equal(t, []string{"confined-operator"}, moduleObjects(t, dyn, schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, ns, "confined"))
	st := moduleStatuses(t, dyn, ns)
	require.Len(t, st, 1, "%v", st)
	assert.Equal(t, "confined", st[0]["name"])
	assert.Equal(t, "Ready", st[0]["state"])
	for _, gvr := range []schema.GroupVersionResource{templateGVR, releaseMetaGVR} {
		list, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Len(t, list.Items, 1, "%s in the runtime's namespace", gvr.Resource)
	}
	_, err = dyn.Resource(kymaGVR).Namespace(runtimeclient.KymaNamespace).Get(ctx, runtimeclient.KymaName, metav1.GetOptions{})
	if err == nil {
		// Another test's runtime may have one; it must not be this runtime's.
		list, _ := dyn.Resource(configMapGVR).Namespace(runtimeclient.KymaNamespace).List(ctx, metav1.ListOptions{LabelSelector: modulemanager.LabelModule + "=confined"})
		assert.Empty(t, list.Items, "nothing of the runtime's modules in kyma-system")
	}

	// The runtime's own kubeconfig is confined: its namespace, nothing else.
	status, err := svc.RuntimeStatus(ctx, tenant, id)
	require.NoError(t, err)
	rc, err := clientcmd.RESTConfigFromKubeConfig([]byte(*status.RuntimeConfiguration.Kubeconfig))
	require.NoError(t, err)
	own, err := dynamic.NewForConfig(rc)
	require.NoError(t, err)
	_, err = own.Resource(kymaGVR).Namespace(ns).Get(ctx, runtimeclient.KymaName, metav1.GetOptions{})
	assert.NoError(t, err, "the runtime's kubeconfig reads its Kyma resource")
	_, err = own.Resource(kymaGVR).Namespace(runtimeclient.KymaNamespace).List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "the runtime's kubeconfig does not reach kyma-system: %v", err)

	failedOp, _, _ := provision("k8s-unknown", "nosuch")
	failed := waitDone(t, &env{client: svc}, failedOp)
	assert.Equal(t, gqlschema.OperationStateFailed, failed.State)
	assert.Contains(t, deref(failed.Message)+failed.LastError.ErrMessage, "the module catalog has no template of the module: nosuch")

	depID, err := svc.DeprovisionRuntime(ctx, tenant, id)
	require.NoError(t, err)
	collectGarbage(t, ctx, dyn, ns, id)
	wait(t, svc, depID, gqlschema.OperationStateSucceeded)
	assert.Empty(t, moduleObjects(t, dyn, configMapGVR, ns, "confined"), "the module is removed with its runtime")
	_, err = dyn.Resource(kymaGVR).Namespace(ns).Get(ctx, runtimeclient.KymaName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the runtime's Kyma resource is gone: %v", err)
	for _, gvr := range []schema.GroupVersionResource{templateGVR, releaseMetaGVR} {
		list, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Empty(t, list.Items, "%s go with the runtime", gvr.Resource)
	}
}

// playStatefulSet plays the StatefulSet controller once the provisioner has applied the
// runtime's StatefulSet: all replicas ready.
func playStatefulSet(t *testing.T, dyn dynamic.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	var sts *unstructured.Unstructured
	require.Eventually(t, func() bool {
		var err error
		sts, err = dyn.Resource(stsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil
	}, 30*time.Second, 50*time.Millisecond)
	require.NoError(t, unstructured.SetNestedMap(sts.Object, map[string]any{
		"observedGeneration": sts.GetGeneration(), "replicas": int64(1), "readyReplicas": int64(1),
	}, "status"))
	_, err := dyn.Resource(stsGVR).Namespace(ns).UpdateStatus(ctx, sts, metav1.UpdateOptions{})
	require.NoError(t, err)
}
