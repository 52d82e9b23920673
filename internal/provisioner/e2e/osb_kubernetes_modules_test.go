package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/module/moduletest"
	"github.com/kyma-project/kyma-environment-broker/internal/modulemanager"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/latencyproxy"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

// hostedModule is the module of TestKubernetesModulesThroughOSB: a module a runtime confined to
// its namespace can install. Its manifest has only namespaced objects that name no namespace
// (the manager puts them into the runtime's namespace), enough of them that applying them takes
// a while on a slow link; its default CR is a Sample whose CRD the host's administrator
// installs (a confined runtime cannot install CRDs), so the module stays Processing until the
// module's operator (the test) reports the CR Ready.
const hostedModule = "hosted"

// hostedObjects are the names of the manifest's ConfigMaps.
var hostedObjects = []string{"hosted-config-1", "hosted-config-2", "hosted-config-3", "hosted-config-4", "hosted-config-5", "hosted-config-6"}

func hostedModuleFiles(version string) map[string]string {
	manifest := "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: hosted-operator\n"
	for _, n := range hostedObjects {
		manifest += "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + n + "\ndata:\n  version: \"" + version + "\"\n"
	}
	group := moduletest.OperatorGVR(hostedModule).Group
	return map[string]string{
		"module-config.yaml": "name: kyma-project.io/module/" + hostedModule + "\nversion: " + version + "\nchannel: regular\nmanifest: manifest.yaml\ndefaultCR: default.yaml\n",
		"manifest.yaml":      manifest,
		"default.yaml":       "apiVersion: " + group + "/v1alpha1\nkind: Sample\nmetadata:\n  name: " + hostedModule + "\nspec:\n  replicas: 1\n",
	}
}

// installHostedCRD installs the module's CRD on the host, as its administrator does once for
// the runtimes of a shared host.
func installHostedCRD(t *testing.T) {
	t.Helper()
	group := moduletest.OperatorGVR(hostedModule).Group
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "crd.yaml"), []byte(moduletest.SampleCRD(hostedModule)), 0o600))
	require.NoError(t, kubetest.InstallCRDs(kubetest.RESTConfig(t), dir, time.Minute))
	t.Cleanup(func() {
		_ = kubetest.Dynamic(t).Resource(kubetest.CRDGVR).Delete(context.Background(), "samples."+group, metav1.DeleteOptions{})
	})
}

// brokerProc is the built cmd/broker in a child process, configured by APP_* variables only; it
// can be killed (SIGKILL) and started again on the same database, directory and port.
type brokerProc struct {
	t      *testing.T
	bin    string
	dir    string
	env    []string
	url    string
	logs   *testenv.SyncBuffer
	cmd    *exec.Cmd
	exited chan struct{}
}

func newBrokerProc(t *testing.T, env ...string) *brokerProc {
	port, sandboxPort := freePort(t), freePort(t)
	p := &brokerProc{t: t, bin: buildBinary(t, "cmd/broker"), dir: t.TempDir(), logs: &testenv.SyncBuffer{},
		url: fmt.Sprintf("http://127.0.0.1:%d", port)}
	p.env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(),
		"APP_PORT=" + strconv.Itoa(port), "APP_SANDBOX_ADDRESS=127.0.0.1:" + strconv.Itoa(sandboxPort), "APP_SANDBOX_TLS_ADDRESS=127.0.0.1:0",
		"APP_BROKER_USERNAME=" + bt.Username, "APP_BROKER_PASSWORD=" + bt.Password, "APP_BROKER_POLL_INTERVAL=200ms",
	}, env...)
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("the broker's log:\n%s", tail(p.logs.String(), 80))
		}
	})
	return p
}

// start runs the broker and waits until /healthz answers.
func (p *brokerProc) start() {
	p.t.Helper()
	p.cmd = exec.Command(p.bin)
	p.cmd.Dir, p.cmd.Env, p.cmd.Stdout, p.cmd.Stderr = p.dir, p.env, p.logs, p.logs
	require.NoError(p.t, p.cmd.Start())
	exited := make(chan struct{})
	go func(cmd *exec.Cmd) { _ = cmd.Wait(); close(exited) }(p.cmd)
	p.exited = exited
	deadline := time.Now().Add(time.Minute)
	for {
		if resp, err := http.Get(p.url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-exited:
			p.t.Fatalf("the broker exited at start:\n%s", tail(p.logs.String(), 60))
		case <-time.After(50 * time.Millisecond):
		}
		require.True(p.t, time.Now().Before(deadline), "the broker did not start:\n%s", tail(p.logs.String(), 60))
	}
}

// kill ends the broker with SIGKILL: no shutdown, leases left behind.
func (p *brokerProc) kill() {
	if p.cmd == nil {
		return
	}
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func (p *brokerProc) client() *bt.Broker {
	b := bt.Remote(p.t, p.url)
	b.Client.Timeout = time.Minute
	return b
}

// getJSON GETs path from the broker into v; false when the broker does not answer 200 (it may
// be restarting).
func (p *brokerProc) getJSON(path string, v any) bool {
	req, err := http.NewRequest(http.MethodGet, p.url+path, nil)
	require.NoError(p.t, err)
	req.SetBasicAuth(bt.Username, bt.Password)
	req.Header.Set("X-Broker-API-Version", "2.16")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	return json.NewDecoder(resp.Body).Decode(v) == nil
}

// waitDone polls last_operation until the operation is no longer in progress.
func (p *brokerProc) waitDone(instanceID, operation string, timeout time.Duration) bt.LastOperation {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	var lo bt.LastOperation
	for time.Now().Before(deadline) {
		if p.getJSON(bt.LastOperationPath(instanceID, operation), &lo) && lo.State != domain.InProgress {
			return lo
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.t.Fatalf("operation %s of %s still not finished after %s: %+v", operation, instanceID, timeout, lo)
	return lo
}

// runtimeID waits until the broker shows the instance's runtime ID.
func (p *brokerProc) runtimeID(instanceID string) string {
	p.t.Helper()
	var id string
	require.Eventually(p.t, func() bool {
		var page struct {
			Data []runtime.DTO `json:"data"`
		}
		if p.getJSON("/runtimes?instance_id="+instanceID, &page) && len(page.Data) == 1 {
			id = page.Data[0].RuntimeID
		}
		return id != ""
	}, 2*time.Minute, 100*time.Millisecond)
	return id
}

// events are the step events of the provisioner's operations of a runtime (they record the
// runtime as their instance).
func (p *brokerProc) events(runtimeID string) []runtime.Event {
	var evs []runtime.Event
	p.getJSON("/events?instance_ids="+runtimeID, &evs)
	return evs
}

func hasEvent(evs []runtime.Event, step, typ string) bool {
	for _, e := range evs {
		if e.Step == step && e.Type == typ {
			return true
		}
	}
	return false
}

// throughProxy is kubeconfig with its server's address replaced by addr (a proxy in front of it).
func throughProxy(t *testing.T, kubeconfig []byte, addr string) []byte {
	t.Helper()
	cfg, err := clientcmd.Load(kubeconfig)
	require.NoError(t, err)
	for _, c := range cfg.Clusters {
		u, err := url.Parse(c.Server)
		require.NoError(t, err)
		u.Host = addr
		c.Server = u.String()
	}
	out, err := clientcmd.Write(*cfg)
	require.NoError(t, err)
	return out
}

func serverAddr(t *testing.T, kubeconfig []byte) string {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	require.NoError(t, err)
	u, err := url.Parse(cfg.Host)
	require.NoError(t, err)
	return u.Host
}

// labelledEverywhere are the names (namespace/name) of the objects of resource gvr in every
// namespace that the module manager applied for module, sorted: a copy anywhere else counts.
func labelledEverywhere(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, module string) []string {
	t.Helper()
	list, err := dyn.Resource(gvr).List(context.Background(), metav1.ListOptions{
		LabelSelector: modulemanager.LabelManagedBy + "=" + modulemanager.ManagedBy + "," + modulemanager.LabelModule + "=" + module,
	})
	require.NoError(t, err)
	var out []string
	for _, it := range list.Items {
		if !strings.HasSuffix(it.GetName(), "-module-inventory") {
			out = append(out, it.GetNamespace()+"/"+it.GetName())
		}
	}
	sort.Strings(out)
	return out
}

func prefixed(ns string, names ...string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, ns+"/"+n)
	}
	sort.Strings(out)
	return out
}

// TestKubernetesModulesThroughOSB: the built broker, configured as users configure it for the
// kubernetes backend (APP_PROVISIONER_SET_JSON with a kubernetes entry, APP_MODULE_* naming a
// catalog of modules published with the built kyma CLI to a registry with basic auth,
// PostgreSQL), provisions through OSB with modules.list: the module's manifest and default CR end
// up in the runtime's namespace of the host, exactly once. The broker is killed (SIGKILL) while the module is being installed, observed
// first in the provisioner's operation (Start_Installation done, Wait_For_Installation under
// way) and on the host (the manager's inventory written, the manifest partly applied, over a
// slowed link), and started again: the installation completes, still exactly once.
// Deprovisioning removes the module, the Kyma resource and the catalog's copies, and deletes the
// runtime's namespace. A provisioning without modules (the default modules, which the catalog
// lacks) fails naming them.
func TestKubernetesModulesThroughOSB(t *testing.T) {
	ctx := context.Background()
	kc := kubetest.Kubeconfig(t)
	dyn := kubetest.Dynamic(t)
	installHostedCRD(t)

	// The module developer's side: keys, the module signed and pushed with the CLI, its release
	// meta and template written into the catalog directory.
	reg := moduletest.Start(t, moduletest.Options{Auth: true})
	cat := newCatalog(t, reg)
	cat.publish(hostedModule, "1.0.0", hostedModuleFiles("1.0.0"), "key.pem")
	creds := filepath.Join(t.TempDir(), "config.json")
	auth := base64.StdEncoding.EncodeToString([]byte(reg.Username + ":" + reg.Password))
	require.NoError(t, os.WriteFile(creds, []byte(`{"auths": {"`+reg.Addr+`": {"auth": "`+auth+`"}}}`), 0o600))

	// The host: the broker reaches its API server through a proxy the test can slow down.
	proxy := latencyproxy.Start(t, serverAddr(t, kc))
	hostKubeconfig := filepath.Join(t.TempDir(), "host-kubeconfig.yaml")
	require.NoError(t, os.WriteFile(hostKubeconfig, throughProxy(t, kc, proxy.Addr), 0o600))
	// The runtimes' /v1/ping answers on loopback (the backend dials *.localhost there).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ping := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), ReadHeaderTimeout: time.Second}
	go func() { _ = ping.Serve(ln) }()
	t.Cleanup(func() { _ = ping.Close() })
	prefix := "osbmod" + strings.ToLower(uuid.NewString()[:6])
	set := fmt.Sprintf(`{"k8s": {"type": "kubernetes", "spec": {"timeout_seconds": 300, "data_dir": "/mnt/data",
		"host": "http://node-*.localhost:%d", "namespace": %q, "image": "rilldata/rill", "kubeconfig_path": %q}}}`,
		ln.Addr().(*net.TCPAddr).Port, prefix, hostKubeconfig)

	p := newBrokerProc(t,
		"APP_DATABASE_DRIVER=postgres", "APP_DATABASE_URL="+pgtest.NewDatabase(t), "APP_DATABASE_SECRET_KEY="+strings.Repeat("k", 32),
		"APP_PROVISIONER_SET_JSON="+set, "APP_DEFAULT_PROVISIONER=k8s",
		"APP_RECONCILER_DISABLED=true", // the provisioner installs Kyma
		"APP_MODULE_CATALOG_DIR="+cat.Dir, "APP_MODULE_PUBLIC_KEYS_FILE="+cat.PublicKeys,
		"APP_MODULE_PLAIN_HTTP_REGISTRIES="+reg.Addr, "APP_MODULE_REGISTRY_CREDENTIALS_FILE="+creds,
	)
	p.start()
	b := p.client()

	id := uuid.NewString()
	params := bt.AWSParams("rt-" + id[:8])
	params["modules"] = map[string]any{"list": []map[string]any{{"name": hostedModule, "channel": "regular", "customResourcePolicy": "CreateAndDelete"}}}
	prov := b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, params, bt.SAPContext("ga-k8s-modules", "sa-"+id[:8])))
	require.Equal(t, http.StatusAccepted, prov.Status, prov.String())

	runtimeID := p.runtimeID(id)
	ns := prefix + "-" + runtimeID
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, e := range p.events(runtimeID) {
			t.Logf("provisioner event: %s %s %s %q", e.Stage, e.Step, e.Type, e.Message)
		}
		if k, err := dyn.Resource(kymaGVR).Namespace(ns).Get(ctx, runtimeclient.KymaName, metav1.GetOptions{}); err == nil {
			t.Logf("the runtime's Kyma resource: %v", k.Object)
		}
	})
	playStatefulSet(t, dyn, ns, "kyma-"+runtimeID)
	// From now on every call of the broker to the host is slow: applying the manifest takes
	// seconds, and the kill below lands in the middle of it.
	proxy.SetLatency(100 * time.Millisecond)

	// Observe the installation under way: Start_Installation done in the provisioner's operation,
	// the manager's inventory written, the manifest partly applied.
	objects := func() int {
		n := 0
		for _, gvr := range []schema.GroupVersionResource{configMapGVR, {Version: "v1", Resource: "serviceaccounts"}} {
			list, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: modulemanager.LabelModule + "=" + hostedModule})
			if err == nil {
				n += len(list.Items)
			}
		}
		return n
	}
	inventory := func() bool {
		list, err := dyn.Resource(configMapGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, cm := range list.Items {
			if strings.HasSuffix(cm.GetName(), "-module-inventory") {
				return true
			}
		}
		return false
	}
	total := len(hostedObjects) + 1 + 1 // the ConfigMaps, the ServiceAccount, the inventory
	deadline := time.Now().Add(3 * time.Minute)
	var seen int
	for {
		require.True(t, time.Now().Before(deadline), "the module's installation was never seen under way (%d of %d objects)", seen, total)
		if inventory() {
			if seen = objects(); seen > 1 && seen < total {
				break // the manifest is being applied
			}
			if seen == total {
				break // applied already: the module waits for its operator (Processing)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.True(t, hasEvent(p.events(runtimeID), "Start_Installation", "succeeded"), "the provisioner's operation is past Start_Installation: %v", p.events(runtimeID))
	assert.False(t, hasEvent(p.events(runtimeID), "Wait_For_Installation", "succeeded"), "the installation step is under way")
	p.kill()
	t.Logf("killed the broker (SIGKILL) with %d of %d module objects applied", seen, total)
	proxy.SetLatency(0)

	p.start()
	// The module's operator reports its CR Ready.
	moduletest.RunSampleOperator(t, dyn, hostedModule, ns)
	lo := p.waitDone(id, prov.Operation(), 5*time.Minute)
	require.Equal(t, domain.Succeeded, lo.State, lo.Description)
	require.True(t, hasEvent(p.events(runtimeID), "Wait_For_Installation", "succeeded"), "the provisioner installed the modules")

	// From outside: the module's objects exist, exactly once, all in the runtime's namespace.
	assert.Equal(t, prefixed(ns, hostedObjects...), labelledEverywhere(t, dyn, configMapGVR, hostedModule), "the manifest's ConfigMaps, once")
	assert.Equal(t, prefixed(ns, "hosted-operator"), labelledEverywhere(t, dyn, schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, hostedModule))
	assert.Equal(t, prefixed(ns, hostedModule), labelledEverywhere(t, dyn, moduletest.OperatorGVR(hostedModule), hostedModule), "the default CR, once")
	st := moduleStatuses(t, dyn, ns)
	require.Len(t, st, 1, "%v", st)
	assert.Equal(t, hostedModule, st[0]["name"])
	assert.Equal(t, "Ready", st[0]["state"])
	assert.Equal(t, "1.0.0", st[0]["version"])
	assert.Equal(t, "regular", st[0]["channel"])
	for _, gvr := range []schema.GroupVersionResource{templateGVR, releaseMetaGVR} {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: "kyma-project.io/copied-by=keb-provisioner"})
		require.NoError(t, err)
		var names []string
		for _, it := range list.Items {
			if strings.HasPrefix(it.GetNamespace(), prefix) {
				names = append(names, it.GetNamespace()+"/"+it.GetName())
			}
		}
		assert.Len(t, names, 1, "one %s, in the runtime's namespace: %v", gvr.Resource, names)
	}
	namespaces, err := kubetest.Clientset(t).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var ours []string
	for _, n := range namespaces.Items {
		if strings.HasPrefix(n.Name, prefix) {
			ours = append(ours, n.Name)
		}
	}
	assert.Equal(t, []string{ns}, ours, "one runtime")
	_, err = dyn.Resource(kymaGVR).Namespace(runtimeclient.KymaNamespace).Get(ctx, runtimeclient.KymaName, metav1.GetOptions{})
	if err == nil {
		list, _ := dyn.Resource(configMapGVR).Namespace(runtimeclient.KymaNamespace).List(ctx, metav1.ListOptions{LabelSelector: modulemanager.LabelModule + "=" + hostedModule})
		assert.Empty(t, list.Items, "nothing of the runtime's modules in kyma-system")
	}
	for _, n := range []string{ns, runtimeclient.KymaNamespace} {
		secrets, err := kubetest.Clientset(t).CoreV1().Secrets(n).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, sec := range secrets.Items {
			for k, v := range sec.Data {
				assert.NotContains(t, string(v), reg.Password, "Secret %s/%s %s", n, sec.Name, k)
			}
		}
	}

	// Deprovisioning: the manager removes the module (its manifest and default CR) and its
	// finalizer, the catalog's copies go, and the backend deletes the runtime's namespace.
	del := b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID))
	require.Equal(t, http.StatusAccepted, del.Status, del.String())
	collectGarbage(t, ctx, dyn, ns, runtimeID)
	lo = p.waitDone(id, del.Operation(), 5*time.Minute)
	require.Equal(t, domain.Succeeded, lo.State, lo.Description)
	assert.Empty(t, labelledEverywhere(t, dyn, configMapGVR, hostedModule), "the manifest is removed")
	assert.Empty(t, labelledEverywhere(t, dyn, schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, hostedModule))
	assert.Empty(t, labelledEverywhere(t, dyn, moduletest.OperatorGVR(hostedModule), hostedModule), "the default CR is removed")
	_, err = dyn.Resource(kymaGVR).Namespace(ns).Get(ctx, runtimeclient.KymaName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the runtime's Kyma resource is gone: %v", err)
	for _, gvr := range []schema.GroupVersionResource{templateGVR, releaseMetaGVR} {
		list, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Empty(t, list.Items, "%s go with the runtime", gvr.Resource)
	}
	nsObj, err := kubetest.Clientset(t).CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err == nil {
		// No namespace controller on this API server: the namespace stays Terminating.
		assert.NotNil(t, nsObj.DeletionTimestamp, "the runtime's namespace is being deleted")
	} else {
		assert.True(t, apierrors.IsNotFound(err), "%v", err)
	}

	// Without modules a provisioning requests the default modules, which this catalog lacks:
	// it fails naming them, and deprovisioning it leaves nothing behind.
	other := uuid.NewString()
	prov = b.Put(bt.InstancePath(other), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-"+other[:8]), bt.SAPContext("ga-k8s-modules", "sa-"+other[:8])))
	require.Equal(t, http.StatusAccepted, prov.Status, prov.String())
	otherRuntime := p.runtimeID(other)
	playStatefulSet(t, dyn, prefix+"-"+otherRuntime, "kyma-"+otherRuntime)
	lo = p.waitDone(other, prov.Operation(), 5*time.Minute)
	require.Equal(t, domain.Failed, lo.State, lo.Description)
	assert.Contains(t, lo.Description, "the module catalog has no template of the module: api-gateway, eventing, istio, monitoring, serverless")
	del = b.Delete(bt.DeprovisionPath(other, bt.AWSPlanID))
	require.Equal(t, http.StatusAccepted, del.Status, del.String())
	collectGarbage(t, ctx, dyn, prefix+"-"+otherRuntime, otherRuntime)
	lo = p.waitDone(other, del.Operation(), 5*time.Minute)
	require.Equal(t, domain.Succeeded, lo.State, lo.Description)

	assert.NotContains(t, p.logs.String(), reg.Password)
	assert.NotContains(t, p.logs.String(), auth)
}
