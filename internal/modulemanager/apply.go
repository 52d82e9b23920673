package modulemanager

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// Labels the manager puts on what it applies.
const (
	LabelManagedBy = "operator.kyma-project.io/managed-by"
	LabelModule    = "operator.kyma-project.io/module-name"
	LabelKyma      = "operator.kyma-project.io/kyma-name"
	ManagedBy      = "module-manager"
)

// ObjectRef names an applied object.
type ObjectRef struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

func refOf(obj *unstructured.Unstructured) ObjectRef {
	gvk := obj.GroupVersionKind()
	return ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

func (r ObjectRef) String() string {
	return fmt.Sprintf("%s %s/%s", schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}, r.Namespace, r.Name)
}

// applier applies and deletes arbitrary objects, mapping kinds to resources through discovery
// (reset when a kind is unknown: the manifest may just have created its CRD).
type applier struct {
	dyn          dynamic.Interface
	mapper       *restmapper.DeferredDiscoveryRESTMapper
	fieldManager string
}

func newApplier(dyn dynamic.Interface, disco discovery.DiscoveryInterface, fieldManager string) *applier {
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco)), fieldManager: fieldManager}
}

// errWaitKind says a kind is not served yet (its CRD is being established).
type errWaitKind struct{ gvk schema.GroupVersionKind }

func (e errWaitKind) Error() string { return fmt.Sprintf("waiting for the API to serve %s", e.gvk) }

func (a *applier) resource(gvk schema.GroupVersionKind, ns string) (dynamic.ResourceInterface, bool, error) {
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		a.mapper.Reset()
		m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if meta.IsNoMatchError(err) {
		return nil, false, errWaitKind{gvk}
	}
	if err != nil {
		return nil, false, fmt.Errorf("map %s: %w", gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return a.dyn.Resource(m.Resource).Namespace(ns), true, nil
	}
	return a.dyn.Resource(m.Resource), false, nil
}

// apply applies an object server-side (forcing ownership: the manager owns what it installs);
// a namespaced object without namespace goes to defaultNS.
func (a *applier) apply(ctx context.Context, obj *unstructured.Unstructured, defaultNS string) (*unstructured.Unstructured, error) {
	ns := obj.GetNamespace()
	client, namespaced, err := a.resource(obj.GroupVersionKind(), ns)
	if err != nil {
		return nil, err
	}
	if namespaced && ns == "" {
		obj.SetNamespace(defaultNS)
		client, _, _ = a.resource(obj.GroupVersionKind(), defaultNS)
	}
	if !namespaced {
		obj.SetNamespace("")
	}
	out, err := client.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: a.fieldManager, Force: true})
	if err != nil {
		return nil, fmt.Errorf("apply %s: %w", refOf(obj), err)
	}
	return out, nil
}

func (a *applier) get(ctx context.Context, r ObjectRef) (*unstructured.Unstructured, error) {
	client, _, err := a.resource(schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}, r.Namespace)
	if err != nil {
		return nil, err
	}
	return client.Get(ctx, r.Name, metav1.GetOptions{})
}

// remove deletes an object; it reports whether it is gone (not found, or its kind no longer
// served).
func (a *applier) remove(ctx context.Context, r ObjectRef) (bool, error) {
	client, _, err := a.resource(schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}, r.Namespace)
	if _, ok := err.(errWaitKind); ok {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	bg := metav1.DeletePropagationBackground
	err = client.Delete(ctx, r.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete %s: %w", r, err)
	}
	_, err = client.Get(ctx, r.Name, metav1.GetOptions{})
	return apierrors.IsNotFound(err), nil
}

// applyOrder puts CRDs and namespaces first, so the objects that need them come after.
func applyOrder(objs []*unstructured.Unstructured) {
	rank := func(o *unstructured.Unstructured) int {
		switch o.GetKind() {
		case "CustomResourceDefinition":
			return 0
		case "Namespace":
			return 1
		}
		return 2
	}
	sort.SliceStable(objs, func(i, j int) bool { return rank(objs[i]) < rank(objs[j]) })
}

// deleteOrder is the reverse: CRDs and namespaces last.
func deleteOrder(refs []ObjectRef) []ObjectRef {
	out := append([]ObjectRef(nil), refs...)
	rank := func(r ObjectRef) int {
		switch r.Kind {
		case "CustomResourceDefinition":
			return 2
		case "Namespace":
			return 1
		}
		return 0
	}
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out
}

// Inventory is what the manager installed for one module of one Kyma resource. It is kept in a
// ConfigMap next to the Kyma resource, written before anything is applied, so a manager that
// dies mid-way (or is replaced) still knows what to prune or remove.
type Inventory struct {
	Module  string      `json:"module"`
	Version string      `json:"version,omitempty"`
	Channel string      `json:"channel,omitempty"`
	Policy  string      `json:"customResourcePolicy,omitempty"`
	Objects []ObjectRef `json:"objects"`
	// CR is the module's default custom resource, when the manager created it.
	CR *ObjectRef `json:"cr,omitempty"`
}

func inventoryName(kyma, module string) string { return kyma + "-" + module + "-module-inventory" }

const inventoryKey = "inventory.json"

func (m *Manager) readInventory(ctx context.Context, ns, kyma, module string) (*Inventory, error) {
	cm, err := m.kube.CoreV1().ConfigMaps(ns).Get(ctx, inventoryName(kyma, module), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read inventory of module %s: %w", module, err)
	}
	var inv Inventory
	if err := json.Unmarshal([]byte(cm.Data[inventoryKey]), &inv); err != nil {
		return nil, fmt.Errorf("inventory of module %s: %w", module, err)
	}
	return &inv, nil
}

func (m *Manager) writeInventory(ctx context.Context, ns, kyma string, inv *Inventory) error {
	data, err := json.Marshal(inv)
	if err != nil {
		return err
	}
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"name": inventoryName(kyma, inv.Module), "namespace": ns,
			"labels": map[string]any{LabelManagedBy: ManagedBy, LabelModule: inv.Module, LabelKyma: kyma},
		},
		"data": map[string]any{inventoryKey: string(data)},
	}}
	_, err = m.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns).
		Apply(ctx, cm.GetName(), cm, metav1.ApplyOptions{FieldManager: m.cfg.FieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("write inventory of module %s: %w", inv.Module, err)
	}
	return nil
}

func (m *Manager) deleteInventory(ctx context.Context, ns, kyma, module string) error {
	err := m.kube.CoreV1().ConfigMaps(ns).Delete(ctx, inventoryName(kyma, module), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete inventory of module %s: %w", module, err)
	}
	return nil
}

func unionRefs(a, b []ObjectRef) []ObjectRef {
	seen := map[ObjectRef]bool{}
	var out []ObjectRef
	for _, r := range append(append([]ObjectRef(nil), a...), b...) {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}
