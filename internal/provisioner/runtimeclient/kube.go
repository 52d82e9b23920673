package runtimeclient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kyma-project/kyma-environment-broker/internal/modulemanager"
)

const (
	fieldManager = "keb-provisioner"
	// KymaNamespace holds the Kyma resource.
	KymaNamespace = "kyma-system"
	// KymaName is the name of the runtime's Kyma resource.
	KymaName = "default"
	// AgentConfigNamespace and AgentConfigSecret: where the Runtime Agent reads its connection
	// details (the seed's tutorial); DefaultAgentConfigSecret is the same as namespace/name.
	AgentConfigNamespace = "compass-system"
	AgentConfigSecret    = "compass-agent-configuration"
	// DefaultAgentConfigSecret is the default of the agent's APP_AGENT_CONFIGURATION_SECRET.
	DefaultAgentConfigSecret = AgentConfigNamespace + "/" + AgentConfigSecret
	// CompassConnectionName is the agent's cluster-scoped status resource.
	CompassConnectionName = "compass-connection"
	operatorBindingLabel  = "kyma-project.io/operator-binding"
	// catalogCopyLabel marks the release metas and templates the provisioner copied from its
	// module catalog into a runtime (value: fieldManager), so they go with the Kyma resource.
	catalogCopyLabel = "kyma-project.io/copied-by"
)

var (
	kymaGVR           = schema.GroupVersionResource{Group: "operator.kyma-project.io", Version: "v1beta2", Resource: "kymas"}
	moduleTemplateGVR = schema.GroupVersionResource{Group: "operator.kyma-project.io", Version: "v1beta2", Resource: "moduletemplates"}
	releaseMetaGVR    = schema.GroupVersionResource{Group: "operator.kyma-project.io", Version: "v1beta2", Resource: "modulereleasemetas"}
	connectionGVR     = schema.GroupVersionResource{Group: "compass.kyma-project.io", Version: "v1alpha1", Resource: "compassconnections"}
)

// Kube is a real runtime cluster reached with its kubeconfig.
type Kube struct {
	core kubernetes.Interface
	dyn  dynamic.Interface
	// modules, when set, installs requested modules (Modules); mgr is its manager for this
	// runtime, made on first use.
	modules *Modules
	mgr     *modulemanager.Manager
	mgrErr  error
	mgrOnce sync.Once
	rc      *rest.Config
	// kymaNS holds the Kyma resource and the modules' release metas and templates: KymaNamespace,
	// or the runtime's own namespace when its kubeconfig is confined to it (confined).
	kymaNS   string
	confined bool
}

var _ Runtime = (*Kube)(nil)

// NewKube opens the cluster of the kubeconfig.
func NewKube(kubeconfig []byte) (*Kube, error) { return NewKubeWithModules(kubeconfig, nil) }

// NewKubeWithModules opens the cluster of the kubeconfig; modules (nil for none) installs the
// modules its Kyma resource requests.
func NewKubeWithModules(kubeconfig []byte, modules *Modules) (*Kube, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the runtime's kubeconfig: %w", err)
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the runtime's client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the runtime's dynamic client: %w", err)
	}
	return &Kube{core: core, dyn: dyn, modules: modules, rc: cfg, kymaNS: KymaNamespace}, nil
}

// NewConfinedKube opens a runtime that is a namespace of a shared host, its kubeconfig confined
// to that namespace: the namespace is its Kyma namespace (the Kyma resource, the modules' release
// metas and templates, and the objects of their manifests that name no namespace).
func NewConfinedKube(kubeconfig []byte, namespace string, modules *Modules) (*Kube, error) {
	if namespace == "" {
		return nil, errors.New("a confined runtime needs its namespace")
	}
	k, err := NewKubeWithModules(kubeconfig, modules)
	if err != nil {
		return nil, err
	}
	k.kymaNS, k.confined = namespace, true
	return k, nil
}

// KymaNamespace is where this runtime's Kyma resource lives.
func (k *Kube) KymaNamespace() string { return k.kymaNS }

func (k *Kube) manager() (*modulemanager.Manager, error) {
	k.mgrOnce.Do(func() {
		cfg := k.modules.Manager
		cfg.Namespace = k.kymaNS
		if k.confined {
			cfg.DefaultNamespace = k.kymaNS // the only namespace its kubeconfig reaches
		}
		k.mgr, k.mgrErr = modulemanager.New(k.rc, cfg)
	})
	return k.mgr, k.mgrErr
}

// installsModules: this runtime's requested modules are installed by the provisioner.
func (k *Kube) installsModules(spec KymaSpec) bool { return k.modules != nil && len(spec.Modules) > 0 }

// ApplyOperatorBindings gives each administrator cluster-admin through its own binding.
func (k *Kube) ApplyOperatorBindings(ctx context.Context, administrators []string) error {
	for _, admin := range administrators {
		sum := sha256.Sum256([]byte(admin))
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{
				Name:   "admin-" + hex.EncodeToString(sum[:8]),
				Labels: map[string]string{operatorBindingLabel: "true"},
			},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: admin}},
		}
		_, err := k.core.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{FieldManager: fieldManager})
		if apierrors.IsAlreadyExists(err) {
			continue // the binding is named after the administrator: it is the same binding
		}
		if err != nil {
			return fmt.Errorf("creating cluster-admin binding for %s: %w", admin, err)
		}
	}
	return nil
}

func (k *Kube) ensureNamespace(ctx context.Context, name string) error {
	_, err := k.core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// ApplyKyma applies the Kyma resource (server-side apply, so a repeat is a no-op).
func (k *Kube) ApplyKyma(ctx context.Context, spec KymaSpec) error {
	// A confined runtime's namespace exists (its backend made it) and its kubeconfig may not
	// create namespaces.
	if !k.confined {
		if err := k.ensureNamespace(ctx, k.kymaNS); err != nil {
			return err
		}
	}
	modules := make([]any, 0, len(spec.Modules))
	for _, m := range spec.Modules {
		entry := map[string]any{"name": m.Name}
		if m.Channel != "" {
			entry["channel"] = m.Channel
		}
		if m.CustomResourcePolicy != "" {
			entry["customResourcePolicy"] = m.CustomResourcePolicy
		}
		modules = append(modules, entry)
	}
	if k.installsModules(spec) {
		objs, err := k.modules.objectsFor(spec.Modules, k.kymaNS)
		if err != nil {
			return err
		}
		for _, o := range objs {
			gvr := moduleTemplateGVR
			if o.GetKind() == "ModuleReleaseMeta" {
				gvr = releaseMetaGVR
			}
			if _, err := k.dyn.Resource(gvr).Namespace(k.kymaNS).Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
				return fmt.Errorf("applying %s %s of module %s: %w", o.GetKind(), o.GetName(), moduleNameOf(o), err)
			}
		}
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operator.kyma-project.io/v1beta2",
		"kind":       "Kyma",
		"metadata": map[string]any{
			"name": KymaName, "namespace": k.kymaNS,
			"labels": map[string]any{"operator.kyma-project.io/kyma-version": spec.Version},
		},
		"spec": map[string]any{"channel": "regular", "profile": spec.Profile, "modules": modules},
	}}
	_, err := k.dyn.Resource(kymaGVR).Namespace(k.kymaNS).Apply(ctx, KymaName, obj, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("applying Kyma resource: %w", err)
	}
	return nil
}

func (k *Kube) KymaState(ctx context.Context, spec KymaSpec, _ time.Time) (string, string, error) {
	if k.installsModules(spec) {
		mgr, err := k.manager()
		if err != nil {
			return "", "", fmt.Errorf("starting the runtime's module manager: %w", err)
		}
		if err := k.modules.reconcile(ctx, mgr, k.kymaNS); err != nil {
			return "", "", err
		}
	}
	obj, err := k.dyn.Resource(kymaGVR).Namespace(k.kymaNS).Get(ctx, KymaName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("reading Kyma resource: %w", err)
	}
	// A state reported for an older version of the spec is not an answer yet.
	if v, _, _ := unstructured.NestedString(obj.Object, "metadata", "labels", "operator.kyma-project.io/kyma-version"); v != spec.Version {
		return KymaProcessing, "waiting for the requested version", nil
	}
	state, _, _ := unstructured.NestedString(obj.Object, "status", "state")
	msg, _, _ := unstructured.NestedString(obj.Object, "status", "message")
	if msg == "" && state == KymaError {
		msg = failedModules(obj)
	}
	return state, msg, nil
}

func (k *Kube) DeleteKyma(ctx context.Context) error {
	err := k.dyn.Resource(kymaGVR).Namespace(k.kymaNS).Delete(ctx, KymaName, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting Kyma resource: %w", err)
	}
	if k.modules == nil {
		return nil
	}
	// The manager's finalizer holds the Kyma resource until a pass has removed its modules.
	mgr, err := k.manager()
	if err != nil {
		return fmt.Errorf("starting the runtime's module manager: %w", err)
	}
	if err := k.modules.reconcile(ctx, mgr, k.kymaNS); err != nil {
		return err
	}
	// Removing takes passes (a CRD's deletion, a module's own finalizers): until the Kyma resource
	// is gone the caller asks again, and each ask is one more pass.
	_, err = k.dyn.Resource(kymaGVR).Namespace(k.kymaNS).Get(ctx, KymaName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return k.deleteCatalogCopies(ctx)
	case err != nil:
		return fmt.Errorf("reading Kyma resource: %w", err)
	}
	return errors.New("the runtime's modules are still being removed")
}

// deleteCatalogCopies deletes the release metas and templates ApplyKyma copied from the catalog.
func (k *Kube) deleteCatalogCopies(ctx context.Context) error {
	for _, gvr := range []schema.GroupVersionResource{moduleTemplateGVR, releaseMetaGVR} {
		err := k.dyn.Resource(gvr).Namespace(k.kymaNS).DeleteCollection(ctx, metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: catalogCopyLabel + "=" + fieldManager})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the module catalog's %s from the runtime: %w", gvr.Resource, err)
		}
	}
	return nil
}

// failedModules names the modules in state Error and why, from the Kyma resource's
// status.modules (the module manager reports there, not in a message of the Kyma resource).
func failedModules(kyma *unstructured.Unstructured) string {
	mods, _, _ := unstructured.NestedSlice(kyma.Object, "status", "modules")
	var out []string
	for _, it := range mods {
		m, _ := it.(map[string]any)
		if m["state"] != KymaError {
			continue
		}
		out = append(out, fmt.Sprintf("module %v: %v", m["name"], m["message"]))
	}
	return strings.Join(out, "; ")
}

// WriteAgentConfig writes the Secret the Runtime Agent reads its connection details from.
func (k *Kube) WriteAgentConfig(ctx context.Context, cfg AgentConfig) error {
	if err := k.ensureNamespace(ctx, AgentConfigNamespace); err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: AgentConfigSecret, Namespace: AgentConfigNamespace},
		StringData: map[string]string{
			"CONNECTOR_URL": cfg.ConnectorURL, "RUNTIME_ID": cfg.RuntimeID, "TENANT": cfg.Tenant, "TOKEN": cfg.Token,
		},
	}
	secrets := k.core.CoreV1().Secrets(AgentConfigNamespace)
	_, err := secrets.Create(ctx, secret, metav1.CreateOptions{FieldManager: fieldManager})
	if apierrors.IsAlreadyExists(err) {
		_, err = secrets.Update(ctx, secret, metav1.UpdateOptions{FieldManager: fieldManager})
	}
	if err != nil {
		return fmt.Errorf("writing Secret %s: %w", DefaultAgentConfigSecret, err)
	}
	return nil
}

func (k *Kube) ConnectionState(ctx context.Context, _ time.Time) (string, error) {
	obj, err := k.dyn.Resource(connectionGVR).Get(ctx, CompassConnectionName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading CompassConnection: %w", err)
	}
	state, _, _ := unstructured.NestedString(obj.Object, "status", "connectionState")
	return state, nil
}
