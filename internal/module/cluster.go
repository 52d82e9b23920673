package module

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/module/modulespec"
	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
)

// Resources the CLI edits.
var (
	KymaGVR           = schema.GroupVersionResource{Group: "operator.kyma-project.io", Version: "v1beta2", Resource: "kymas"}
	ModuleTemplateGVR = schema.GroupVersionResource{Group: "operator.kyma-project.io", Version: "v1beta2", Resource: "moduletemplates"}
	namespaceGVR      = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// Defaults of the Kyma resource the CLI edits.
const (
	DefaultKymaName      = "default-kyma"
	DefaultKymaNamespace = "kyma-system"
	FieldManager         = "kyma-cli"
	PolicyCreateAndDel   = modulespec.PolicyCreateAndDel
	PolicyIgnore         = modulespec.PolicyIgnore
	StateReady           = "Ready"
)

// ModuleSpec is an entry of the Kyma resource's spec.modules.
type ModuleSpec = modulespec.ModuleSpec

// Cluster is a Kubernetes cluster with the Kyma and ModuleTemplate CRDs.
type Cluster struct {
	dyn dynamic.Interface
	log logrus.FieldLogger
}

// RESTConfig loads a kubeconfig: the file given, else $KUBECONFIG, else ~/.kube/config.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return cfg, nil
}

// NewCluster makes a cluster client.
func NewCluster(cfg *rest.Config, log logrus.FieldLogger) (*Cluster, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &Cluster{dyn: dyn, log: log}, nil
}

// Enable adds a module to the Kyma resource's spec.modules, or updates its channel and policy;
// it retries on conflicts. It reports whether anything changed.
func (c *Cluster) Enable(ctx context.Context, ns, kyma string, m ModuleSpec) (bool, error) {
	if err := m.Validate(); err != nil {
		return false, err
	}
	return c.editModules(ctx, ns, kyma, func(mods []ModuleSpec) []ModuleSpec {
		for i := range mods {
			if mods[i].Name == m.Name {
				mods[i] = m
				return mods
			}
		}
		return append(mods, m)
	})
}

// Disable removes a module from the Kyma resource's spec.modules (a no-op if absent).
func (c *Cluster) Disable(ctx context.Context, ns, kyma, module string) (bool, error) {
	return c.editModules(ctx, ns, kyma, func(mods []ModuleSpec) []ModuleSpec {
		out := mods[:0]
		for _, m := range mods {
			if m.Name != module {
				out = append(out, m)
			}
		}
		return out
	})
}

// editBackoff outlasts many concurrent editors of one Kyma resource (each retry rereads it).
func editBackoff() wait.Backoff {
	return wait.Backoff{Steps: 40, Duration: 10 * time.Millisecond, Factor: 1.3, Jitter: 1, Cap: time.Second}
}

func (c *Cluster) editModules(ctx context.Context, ns, name string, edit func([]ModuleSpec) []ModuleSpec) (bool, error) {
	client := c.dyn.Resource(KymaGVR).Namespace(ns)
	changed := false
	err := retry.RetryOnConflict(editBackoff(), func() error {
		obj, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		before, err := KymaModules(obj)
		if err != nil {
			return err
		}
		after := edit(append([]ModuleSpec(nil), before...))
		if equalModules(before, after) {
			changed = false
			return nil
		}
		list := make([]any, 0, len(after))
		for _, m := range after {
			o, err := toObject(m)
			if err != nil {
				return err
			}
			list = append(list, o)
		}
		if err := unstructured.SetNestedSlice(obj.Object, list, "spec", "modules"); err != nil {
			return err
		}
		_, err = client.Update(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager})
		changed = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("edit modules of Kyma %s/%s: %w", ns, name, err)
	}
	return changed, nil
}

// KymaModules reads a Kyma resource's spec.modules.
func KymaModules(obj *unstructured.Unstructured) ([]ModuleSpec, error) {
	return modulespec.KymaModules(obj)
}

func equalModules(a, b []ModuleSpec) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ModuleState is a module's state in the Kyma resource's status.modules ("" if not reported).
func ModuleState(obj *unstructured.Unstructured, module string) string {
	list, _, _ := unstructured.NestedSlice(obj.Object, "status", "modules")
	for _, it := range list {
		m, ok := it.(map[string]any)
		if ok && m["name"] == module {
			s, _ := m["state"].(string)
			return s
		}
	}
	return ""
}

// WaitReady polls the Kyma resource until the module reports Ready; progress hears every state
// change. ctx bounds the wait.
func (c *Cluster) WaitReady(ctx context.Context, ns, kyma, module string, interval time.Duration, progress func(state string)) error {
	client := c.dyn.Resource(KymaGVR).Namespace(ns)
	last := "-"
	err := wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		obj, err := client.Get(ctx, kyma, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				return false, err
			}
			// Transient API errors: keep polling until the deadline.
			c.log.WithError(err).Debug("get Kyma")
			return false, nil
		}
		state := ModuleState(obj, module)
		if state != last {
			last = state
			if progress != nil {
				progress(state)
			}
		}
		return state == StateReady, nil
	})
	if err != nil {
		if last == "" || last == "-" {
			last = "not reported"
		}
		return fmt.Errorf("wait for module %s in Kyma %s/%s to be Ready (last state: %s): %w", module, ns, kyma, last, err)
	}
	return nil
}

// ClusterModule is a module available to a cluster: one of its ModuleTemplates.
type ClusterModule struct {
	Module    string `json:"module"`
	Channel   string `json:"channel"`
	Version   string `json:"version"`
	Component string `json:"component"`
	Template  string `json:"template"`
}

// ListTemplates gives the modules of the cluster's ModuleTemplates (namespace "" for all), sorted.
func (c *Cluster) ListTemplates(ctx context.Context, ns string) ([]ClusterModule, error) {
	list, err := c.dyn.Resource(ModuleTemplateGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ModuleTemplates: %w", err)
	}
	out := make([]ClusterModule, 0, len(list.Items))
	for i := range list.Items {
		t := &list.Items[i]
		m := ClusterModule{Module: t.GetLabels()[LabelModuleName], Template: t.GetNamespace() + "/" + t.GetName()}
		m.Channel, _, _ = unstructured.NestedString(t.Object, "spec", "channel")
		if cd, err := DescriptorFromTemplate(t); err == nil {
			m.Version, m.Component = cd.Component.Version, cd.Component.Name
			if m.Module == "" {
				m.Module = ModuleName(cd.Component.Name)
			}
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Module != out[j].Module {
			return out[i].Module < out[j].Module
		}
		return out[i].Channel < out[j].Channel
	})
	return out, nil
}

// KymaSpec is the Kyma resource deploy applies.
type KymaSpec struct {
	Namespace, Name, Channel string
	Modules                  []ModuleSpec
}

// Deploy applies (server-side, field manager kyma-cli) the namespaces, the ModuleTemplates and
// the Kyma resource, so applying twice changes nothing.
func (c *Cluster) Deploy(ctx context.Context, templates []*unstructured.Unstructured, kyma KymaSpec) error {
	if kyma.Namespace == "" {
		kyma.Namespace = DefaultKymaNamespace
	}
	if kyma.Name == "" {
		kyma.Name = DefaultKymaName
	}
	if kyma.Channel == "" {
		kyma.Channel = DefaultChannel
	}
	namespaces := map[string]bool{kyma.Namespace: true}
	for _, t := range templates {
		if t.GetKind() != KindModuleTemplate || t.GetAPIVersion() != OperatorAPIVersion {
			return fmt.Errorf("deploy: %s %s is not a %s %s", t.GetAPIVersion(), t.GetKind(), OperatorAPIVersion, KindModuleTemplate)
		}
		namespaces[t.GetNamespace()] = true
	}
	nsNames := make([]string, 0, len(namespaces))
	for ns := range namespaces {
		nsNames = append(nsNames, ns)
	}
	sort.Strings(nsNames)
	for _, ns := range nsNames {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
		if err := c.apply(ctx, c.dyn.Resource(namespaceGVR), obj); err != nil {
			return err
		}
	}
	for _, t := range templates {
		if err := c.apply(ctx, c.dyn.Resource(ModuleTemplateGVR).Namespace(t.GetNamespace()), t); err != nil {
			return err
		}
	}
	mods := make([]any, 0, len(kyma.Modules))
	for _, m := range kyma.Modules {
		if err := m.Validate(); err != nil {
			return err
		}
		o, err := toObject(m)
		if err != nil {
			return err
		}
		mods = append(mods, o)
	}
	spec := map[string]any{"channel": kyma.Channel}
	// Without modules the applied configuration leaves spec.modules alone (enable/disable own it).
	if len(mods) > 0 {
		spec["modules"] = mods
	}
	k := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": OperatorAPIVersion, "kind": KindKyma,
		"metadata": map[string]any{"name": kyma.Name, "namespace": kyma.Namespace},
		"spec":     spec,
	}}
	return c.apply(ctx, c.dyn.Resource(KymaGVR).Namespace(kyma.Namespace), k)
}

func (c *Cluster) apply(ctx context.Context, client dynamic.ResourceInterface, obj *unstructured.Unstructured) error {
	_, err := client.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	c.log.WithFields(logrus.Fields{"kind": obj.GetKind(), "namespace": obj.GetNamespace(), "name": obj.GetName()}).Debug("applied")
	return nil
}

// Component configuration keys that carry a module's channel and policy (see modulespec).
const (
	ConfigKeyChannel              = modulespec.ConfigKeyChannel
	ConfigKeyCustomResourcePolicy = modulespec.ConfigKeyCustomResourcePolicy
)
