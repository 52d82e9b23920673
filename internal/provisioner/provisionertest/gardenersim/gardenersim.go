// Package gardenersim is a test controller that plays Gardener on a real kube-apiserver: it
// reconciles Shoots the way Gardener reports them (a DNS domain, a last operation per generation,
// hibernation, the advertised API server address) and serves Gardener's API in front of the
// kube-apiserver (api.go): Shoots that break Gardener's rules (shootcontract) are rejected, and
// shoots/{name}/adminkubeconfig issues admin kubeconfigs of this same API server, which then
// serves as the runtime. Shoots named stuck-* never finish creation; fail-* fail it with a quota error. It
// also plays the lifecycle manager (Kyma Ready) and, when asked, the Runtime Agent
// (CompassConnection Synchronized once its Secret exists); tests that run the real agent leave
// that to it.
package gardenersim

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

var (
	shootGVR      = schema.GroupVersionResource{Group: "core.gardener.cloud", Version: "v1beta1", Resource: "shoots"}
	kymaGVR       = schema.GroupVersionResource{Group: "operator.kyma-project.io", Version: "v1beta2", Resource: "kymas"}
	connectionGVR = schema.GroupVersionResource{Group: "compass.kyma-project.io", Version: "v1alpha1", Resource: "compassconnections"}
)

// AccountPoolProviders are the hyperscalers the project's account pool has bindings for: per
// provider two of its own (<provider>-1, <provider>-2, hyperscalerType <provider>) and a shared
// one (<provider>-shared), as SecretBindings.
var AccountPoolProviders = []string{"aws", "azure", "gcp", "openstack"}

var secretBindingGVR = schema.GroupVersionResource{Group: "core.gardener.cloud", Version: "v1beta1", Resource: "secretbindings"}

// addAccountPool creates the project's hyperscaler account pool, as an operator adds accounts.
func addAccountPool(t *testing.T, dyn dynamic.Interface, ns string) {
	t.Helper()
	for _, p := range AccountPoolProviders {
		for _, b := range []struct {
			name   string
			shared bool
		}{{p + "-1", false}, {p + "-2", false}, {p + "-shared", true}} {
			labels := map[string]any{"hyperscalerType": p}
			if b.shared {
				labels["shared"] = "true"
			}
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "core.gardener.cloud/v1beta1", "kind": "SecretBinding",
				"metadata":  map[string]any{"name": b.name, "namespace": ns, "labels": labels},
				"secretRef": map[string]any{"name": b.name, "namespace": ns},
				"provider":  map[string]any{"type": p},
			}}
			_, err := dyn.Resource(secretBindingGVR).Namespace(ns).Create(context.Background(), obj, metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
}

// QuotaError is the reason a fail-* Shoot's creation fails with.
const QuotaError = "Infrastructure creation failed: quota exceeded for n2-standard-4 in europe-west3"

// Options tune the simulator.
type Options struct {
	// PlayAgent marks the CompassConnection Synchronized once the agent's Secret exists.
	PlayAgent bool
	// MaxKubeconfigExpiration caps the admin kubeconfigs' validity, as Gardener's
	// --shoot-admin-kubeconfig-max-expiration does (24h when 0).
	MaxKubeconfigExpiration time.Duration
	// APIOnly serves Gardener's API (validation, adminkubeconfig) without reconciling Shoots
	// (nor playing the lifecycle manager or the agent): the test reports their status itself.
	APIOnly bool
	// ModuleManager: a module manager reports the Kyma resources' state; the simulator marks
	// Ready only those without spec.modules.
	ModuleManager bool
}

// Sim is a running simulator.
type Sim struct {
	// Project is the Gardener project (namespace garden-<project>).
	Project string
	// Kubeconfig is Gardener's: the simulator's API on loopback.
	Kubeconfig []byte
	api        *api
}

// AdminKubeconfigRequests are the adminkubeconfig requests answered so far.
func (s *Sim) AdminKubeconfigRequests() []AdminKubeconfigRequest {
	s.api.mu.Lock()
	defer s.api.mu.Unlock()
	return append([]AdminKubeconfigRequest(nil), s.api.issued...)
}

// Rejected are the rules of the Shoot writes rejected so far.
func (s *Sim) Rejected() []string {
	s.api.mu.Lock()
	defer s.api.mu.Unlock()
	return append([]string(nil), s.api.rejects...)
}

// Start runs the simulator on a new Gardener project, with its account pool
// (AccountPoolProviders), until the test ends; it returns the project and the kubeconfig of
// Gardener's API.
func Start(t *testing.T, o Options) (string, []byte) {
	s := StartSim(t, o)
	return s.Project, s.Kubeconfig
}

// StartSim is Start, returning the simulator for inspection.
func StartSim(t *testing.T, o Options) *Sim {
	t.Helper()
	core, dyn := kubetest.Clientset(t), kubetest.Dynamic(t)
	project := fmt.Sprintf("e2e%d", time.Now().UnixNano()%1_000_000)
	ns := "garden-" + project
	_, err := core.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = core.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })

	addAccountPool(t, dyn, ns)

	ctx, cancel := context.WithCancel(context.Background())
	cfg := kubetest.RESTConfig(t)
	g := &fakeGardener{t: t, core: core, dyn: dyn, namespace: ns, host: cfg.Host, playAgent: o.PlayAgent, moduleManager: o.ModuleManager}
	maxExp := o.MaxKubeconfigExpiration
	if maxExp == 0 {
		maxExp = 24 * time.Hour
	}
	a, err := newAPI(g, cfg, maxExp)
	require.NoError(t, err)
	kc, stop, err := a.serve(ctx)
	require.NoError(t, err)
	done := make(chan struct{})
	if o.APIOnly {
		close(done)
	} else {
		go func() { defer close(done); g.run(ctx) }()
	}
	t.Cleanup(func() { cancel(); <-done; stop(); a.cleanup(ns) })
	return &Sim{Project: project, Kubeconfig: kc, api: a}
}

type fakeGardener struct {
	t             *testing.T
	core          kubernetes.Interface
	dyn           dynamic.Interface
	namespace     string
	host          string
	playAgent     bool
	moduleManager bool
}

func (g *fakeGardener) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := g.reconcile(ctx); err != nil && ctx.Err() == nil {
			g.t.Logf("fake gardener: %v", err)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

func (g *fakeGardener) reconcile(ctx context.Context) error {
	shoots, err := g.dyn.Resource(shootGVR).Namespace(g.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range shoots.Items {
		if err := g.reconcileShoot(ctx, &shoots.Items[i]); err != nil {
			return err
		}
	}
	kymas, err := g.dyn.Resource(kymaGVR).Namespace(runtimeclient.KymaNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range kymas.Items {
		k := &kymas.Items[i]
		if mods, _, _ := unstructured.NestedSlice(k.Object, "spec", "modules"); g.moduleManager && len(mods) > 0 {
			continue
		}
		if state, _, _ := unstructured.NestedString(k.Object, "status", "state"); state != runtimeclient.KymaReady {
			_ = unstructured.SetNestedField(k.Object, runtimeclient.KymaReady, "status", "state")
			if _, err := g.dyn.Resource(kymaGVR).Namespace(k.GetNamespace()).UpdateStatus(ctx, k, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
	}
	if !g.playAgent {
		return nil
	}
	return g.playTheAgent(ctx)
}

func (g *fakeGardener) reconcileShoot(ctx context.Context, s *unstructured.Unstructured) error {
	name := s.GetName()
	if domain, _, _ := unstructured.NestedString(s.Object, "spec", "dns", "domain"); domain == "" {
		_ = unstructured.SetNestedField(s.Object, name+".e2e.shoot.test", "spec", "dns", "domain")
		updated, err := g.dyn.Resource(shootGVR).Namespace(g.namespace).Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		s = updated
	}
	observed, _, _ := unstructured.NestedInt64(s.Object, "status", "observedGeneration")
	if observed == s.GetGeneration() && !strings.HasPrefix(name, "stuck-") {
		return nil
	}
	lastOp := map[string]any{"type": "Reconcile", "state": "Succeeded", "progress": int64(100), "description": "Shoot cluster has been successfully reconciled."}
	switch {
	case strings.HasPrefix(name, "stuck-"):
		lastOp = map[string]any{"type": "Create", "state": "Processing", "progress": int64(40), "description": "Waiting for infrastructure"}
	case strings.HasPrefix(name, "fail-"):
		lastOp = map[string]any{"type": "Create", "state": "Failed", "progress": int64(10), "description": QuotaError}
	}
	hibernated, _, _ := unstructured.NestedBool(s.Object, "spec", "hibernation", "enabled")
	_ = unstructured.SetNestedField(s.Object, lastOp, "status", "lastOperation")
	if !strings.HasPrefix(name, "stuck-") && !strings.HasPrefix(name, "fail-") {
		// What shoots/adminkubeconfig needs: the API server's address.
		_ = unstructured.SetNestedSlice(s.Object, []any{map[string]any{"name": "external", "url": g.host}}, "status", "advertisedAddresses")
	}
	_ = unstructured.SetNestedField(s.Object, s.GetGeneration(), "status", "observedGeneration")
	_ = unstructured.SetNestedField(s.Object, hibernated, "status", "hibernated")
	if _, err := g.dyn.Resource(shootGVR).Namespace(g.namespace).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
		return err
	}
	return nil
}

func (g *fakeGardener) playTheAgent(ctx context.Context) error {
	_, err := g.core.CoreV1().Secrets(runtimeclient.AgentConfigNamespace).Get(ctx, runtimeclient.AgentConfigSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	// As the agent does under the real CRD (no status subresource; spec.managementInfo and the
	// status's connectionState and connectionStatus.certificateStatus required): one plain write.
	conns := g.dyn.Resource(connectionGVR)
	status := map[string]any{"connectionState": runtimeclient.ConnectionSynchronized, "connectionStatus": map[string]any{"certificateStatus": map[string]any{}}}
	conn, err := conns.Get(ctx, runtimeclient.CompassConnectionName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		conn = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "compass.kyma-project.io/v1alpha1", "kind": "CompassConnection",
			"metadata": map[string]any{"name": runtimeclient.CompassConnectionName},
			"spec":     map[string]any{"managementInfo": map[string]any{"connectorUrl": "https://connector.sim", "directorUrl": "https://director.sim"}},
			"status":   status,
		}}
		_, err = conns.Create(ctx, conn, metav1.CreateOptions{})
		return err
	} else if err != nil {
		return err
	}
	if state, _, _ := unstructured.NestedString(conn.Object, "status", "connectionState"); state == runtimeclient.ConnectionSynchronized {
		return nil
	}
	conn.Object["status"] = status
	_, err = conns.Update(ctx, conn, metav1.UpdateOptions{})
	return err
}
