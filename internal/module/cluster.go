package module

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/module/modulespec"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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
	ReleaseMetaGVR    = schema.GroupVersionResource{Group: "operator.kyma-project.io", Version: "v1beta2", Resource: "modulereleasemetas"}
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

// Enable adds a module to the Kyma resource's spec.modules, or sets the channel and policy given
// (non-empty) on its entry; every other field of the entry, and every other entry, is kept as it
// is. It retries on conflicts and reports whether anything changed.
func (c *Cluster) Enable(ctx context.Context, ns, kyma string, m ModuleSpec) (bool, error) {
	if err := m.Validate(); err != nil {
		return false, err
	}
	return c.editModules(ctx, ns, kyma, func(mods []any) ([]any, error) {
		for i, it := range mods {
			entry, ok := it.(map[string]any)
			if !ok || entry["name"] != m.Name {
				continue
			}
			updated := make(map[string]any, len(entry))
			for k, v := range entry {
				updated[k] = v
			}
			if m.Channel != "" {
				updated["channel"] = m.Channel
			}
			if m.CustomResourcePolicy != "" {
				updated["customResourcePolicy"] = m.CustomResourcePolicy
			}
			mods[i] = updated
			return mods, nil
		}
		entry := map[string]any{"name": m.Name}
		if m.Channel != "" {
			entry["channel"] = m.Channel
		}
		if m.CustomResourcePolicy != "" {
			entry["customResourcePolicy"] = m.CustomResourcePolicy
		}
		return append(mods, entry), nil
	})
}

// Disable removes a module's entry from the Kyma resource's spec.modules (a no-op if absent);
// with a channel, only an entry of that channel (or without one). Other entries are kept as
// they are.
func (c *Cluster) Disable(ctx context.Context, ns, kyma, module, channel string) (bool, error) {
	return c.editModules(ctx, ns, kyma, func(mods []any) ([]any, error) {
		out := make([]any, 0, len(mods))
		for _, it := range mods {
			entry, ok := it.(map[string]any)
			if ok && entry["name"] == module {
				ch, _ := entry["channel"].(string)
				if channel == "" || ch == "" || ch == channel {
					continue
				}
			}
			out = append(out, it)
		}
		return out, nil
	})
}

// editBackoff outlasts many concurrent editors of one Kyma resource (each retry rereads it).
func editBackoff() wait.Backoff {
	return wait.Backoff{Steps: 40, Duration: 10 * time.Millisecond, Factor: 1.3, Jitter: 1, Cap: time.Second}
}

// editModules edits the raw spec.modules of a Kyma resource (so fields this CLI does not know
// survive) and updates it if the edit changed anything, retrying on conflicts.
func (c *Cluster) editModules(ctx context.Context, ns, name string, edit func([]any) ([]any, error)) (bool, error) {
	client := c.dyn.Resource(KymaGVR).Namespace(ns)
	changed := false
	err := retry.RetryOnConflict(editBackoff(), func() error {
		changed = false
		obj, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		before, _, err := unstructured.NestedSlice(obj.Object, "spec", "modules")
		if err != nil {
			return fmt.Errorf("spec.modules: %w", err)
		}
		var copied []any
		if before != nil {
			copied = runtime.DeepCopyJSONValue(before).([]any)
		}
		after, err := edit(copied)
		if err != nil {
			return err
		}
		if equality.Semantic.DeepEqual(before, after) {
			return nil
		}
		if err := unstructured.SetNestedSlice(obj.Object, after, "spec", "modules"); err != nil {
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

// ErrNoTemplate says that no ModuleTemplate offers a module in a channel.
var ErrNoTemplate = errors.New("no ModuleTemplate")

// Resolved is the ModuleTemplate a module's channel resolves to.
type Resolved struct {
	Module, Channel, Version string
	// Template is the ModuleTemplate.
	Template *unstructured.Unstructured
	// ReleaseMeta names the ModuleReleaseMeta used ("" for a channel-named template).
	ReleaseMeta string
}

// Resolve finds a module's ModuleTemplate in a namespace as lifecycle-manager does: the
// ModuleReleaseMeta named after the module gives the channel's version (or the mandatory
// version) and the template is <module>-<version>. Without a release meta it falls back to what
// older lifecycle-managers read: a template labelled with the module's name whose spec.channel
// is the channel.
func Resolve(ctx context.Context, dyn dynamic.Interface, ns, module, channel string) (*Resolved, error) {
	mrm, err := dyn.Resource(ReleaseMetaGVR).Namespace(ns).Get(ctx, module, metav1.GetOptions{})
	switch {
	case err == nil:
		r := &Resolved{Module: module, Channel: channel, ReleaseMeta: ns + "/" + module}
		if v, ok, _ := unstructured.NestedString(mrm.Object, "spec", "mandatory", "version"); ok {
			r.Version = v
		} else {
			channels, _, _ := unstructured.NestedSlice(mrm.Object, "spec", "channels")
			var known []string
			for _, it := range channels {
				a, _ := it.(map[string]any)
				ch, _ := a["channel"].(string)
				known = append(known, ch)
				if ch == channel {
					r.Version, _ = a["version"].(string)
				}
			}
			if r.Version == "" {
				return nil, fmt.Errorf("%w for module %s: ModuleReleaseMeta %s/%s has no channel %q (channels: %s)", ErrNoTemplate, module, ns, module, channel, strings.Join(known, ", "))
			}
		}
		name := TemplateName(module, r.Version)
		t, err := dyn.Resource(ModuleTemplateGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w %s/%s: ModuleReleaseMeta %s/%s assigns version %s to channel %q", ErrNoTemplate, ns, name, ns, module, r.Version, channel)
		}
		if err != nil {
			return nil, fmt.Errorf("get ModuleTemplate %s/%s: %w", ns, name, err)
		}
		r.Template = t
		return r, nil
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("get ModuleReleaseMeta %s/%s: %w", ns, module, err)
	}
	list, err := dyn.Resource(ModuleTemplateGVR).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelModuleName + "=" + module})
	if err != nil {
		return nil, fmt.Errorf("list ModuleTemplates of module %s: %w", module, err)
	}
	for i := range list.Items {
		t := &list.Items[i]
		if ch, _, _ := unstructured.NestedString(t.Object, "spec", "channel"); ch == channel {
			v, _, _ := unstructured.NestedString(t.Object, "spec", "version")
			return &Resolved{Module: module, Channel: channel, Version: v, Template: t}, nil
		}
	}
	return nil, fmt.Errorf("%w for module %s in channel %q in namespace %s: no ModuleReleaseMeta %s/%s and no template with that channel", ErrNoTemplate, module, channel, ns, ns, module)
}

// CheckTemplate checks that the module resolves to a ModuleTemplate in the Kyma resource's
// namespace, for the channel given or else the Kyma's.
func (c *Cluster) CheckTemplate(ctx context.Context, ns, kyma string, m ModuleSpec) error {
	channel := m.Channel
	if channel == "" {
		obj, err := c.dyn.Resource(KymaGVR).Namespace(ns).Get(ctx, kyma, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get Kyma %s/%s: %w", ns, kyma, err)
		}
		channel = KymaChannel(obj)
	}
	_, err := Resolve(ctx, c.dyn, ns, m.Name, channel)
	return err
}

// KymaChannel is a Kyma resource's spec.channel (DefaultChannel if unset).
func KymaChannel(obj *unstructured.Unstructured) string {
	if ch, _, _ := unstructured.NestedString(obj.Object, "spec", "channel"); ch != "" {
		return ch
	}
	return DefaultChannel
}

// WaitRemoved polls the Kyma resource until the module is no longer reported in status.modules
// (its manager finished removing it); progress hears every state change.
func (c *Cluster) WaitRemoved(ctx context.Context, ns, kyma, module string, interval time.Duration, progress func(state string)) error {
	client := c.dyn.Resource(KymaGVR).Namespace(ns)
	last := "-"
	err := wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		obj, err := client.Get(ctx, kyma, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			c.log.WithError(err).Debug("get Kyma")
			return false, nil
		}
		state := ModuleState(obj, module)
		if state != last && state != "" {
			last = state
			if progress != nil {
				progress(state)
			}
		}
		return !moduleReported(obj, module), nil
	})
	if err != nil {
		return fmt.Errorf("wait for module %s to be removed from Kyma %s/%s (last state: %s): %w", module, ns, kyma, last, err)
	}
	return nil
}

func moduleReported(obj *unstructured.Unstructured, module string) bool {
	list, _, _ := unstructured.NestedSlice(obj.Object, "status", "modules")
	for _, it := range list {
		if m, ok := it.(map[string]any); ok && m["name"] == module {
			return true
		}
	}
	return false
}

// ClusterModule is a module available to a cluster (a channel of a ModuleReleaseMeta, or a
// template) or enabled in a Kyma resource (then with its state).
type ClusterModule struct {
	Module    string `json:"module"`
	Channel   string `json:"channel"`
	Version   string `json:"version"`
	Component string `json:"component,omitempty"`
	Template  string `json:"template"`
	State     string `json:"state,omitempty"`
	Message   string `json:"message,omitempty"`
}

// ChannelMandatory is the channel shown for a mandatory module's version.
const ChannelMandatory = "(mandatory)"

// ListTemplates gives the modules offered in a namespace ("" for all), sorted: one row per
// channel of each ModuleReleaseMeta (template "-" when its template is missing), and one per
// template no release meta names (the channel of a channel-named template, else "").
func (c *Cluster) ListTemplates(ctx context.Context, ns string) ([]ClusterModule, error) {
	list, err := c.dyn.Resource(ModuleTemplateGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ModuleTemplates: %w", err)
	}
	metas, err := c.dyn.Resource(ReleaseMetaGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ModuleReleaseMetas: %w", err)
	}
	templates := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		t := &list.Items[i]
		templates[t.GetNamespace()+"/"+t.GetName()] = t
	}
	used := map[string]bool{}
	var out []ClusterModule
	row := func(module, channel, version, key string) {
		m := ClusterModule{Module: module, Channel: channel, Version: version, Template: "-"}
		if t, ok := templates[key]; ok {
			used[key] = true
			m.Template = key
			if cd, err := DescriptorFromTemplate(t); err == nil {
				m.Component = cd.Component.Name
				if m.Version == "" {
					m.Version = cd.Component.Version
				}
			}
		}
		out = append(out, m)
	}
	for i := range metas.Items {
		mrm := &metas.Items[i]
		module, _, _ := unstructured.NestedString(mrm.Object, "spec", "moduleName")
		if module == "" {
			module = mrm.GetName()
		}
		if v, ok, _ := unstructured.NestedString(mrm.Object, "spec", "mandatory", "version"); ok {
			row(module, ChannelMandatory, v, mrm.GetNamespace()+"/"+TemplateName(module, v))
		}
		channels, _, _ := unstructured.NestedSlice(mrm.Object, "spec", "channels")
		for _, it := range channels {
			a, _ := it.(map[string]any)
			ch, _ := a["channel"].(string)
			v, _ := a["version"].(string)
			row(module, ch, v, mrm.GetNamespace()+"/"+TemplateName(module, v))
		}
	}
	for i := range list.Items {
		t := &list.Items[i]
		key := t.GetNamespace() + "/" + t.GetName()
		if used[key] {
			continue
		}
		m := ClusterModule{Module: t.GetLabels()[LabelModuleName], Template: key}
		m.Channel, _, _ = unstructured.NestedString(t.Object, "spec", "channel")
		m.Version, _, _ = unstructured.NestedString(t.Object, "spec", "version")
		if cd, err := DescriptorFromTemplate(t); err == nil {
			m.Component = cd.Component.Name
			if m.Version == "" {
				m.Version = cd.Component.Version
			}
			if m.Module == "" {
				m.Module = ModuleName(cd.Component.Name)
			}
		}
		out = append(out, m)
	}
	sortModules(out)
	return out, nil
}

func sortModules(out []ClusterModule) {
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Module != out[j].Module {
			return out[i].Module < out[j].Module
		}
		if out[i].Channel != out[j].Channel {
			return out[i].Channel < out[j].Channel
		}
		return out[i].Template < out[j].Template
	})
}

// ListKymaModules gives the modules of a Kyma resource: each entry of spec.modules with its
// channel (the Kyma's if the entry names none) and what status.modules reports (version, state,
// message, template), then modules reported but no longer in the spec (being removed).
func (c *Cluster) ListKymaModules(ctx context.Context, ns, kyma string) ([]ClusterModule, error) {
	obj, err := c.dyn.Resource(KymaGVR).Namespace(ns).Get(ctx, kyma, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get Kyma %s/%s: %w", ns, kyma, err)
	}
	status := map[string]map[string]any{}
	var order []string
	reported, _, _ := unstructured.NestedSlice(obj.Object, "status", "modules")
	for _, it := range reported {
		m, ok := it.(map[string]any)
		if name, _ := m["name"].(string); ok && name != "" {
			status[name] = m
			order = append(order, name)
		}
	}
	fill := func(m *ClusterModule, st map[string]any) {
		if st == nil {
			return
		}
		m.State, _ = st["state"].(string)
		m.Message, _ = st["message"].(string)
		if v, _ := st["version"].(string); v != "" {
			m.Version = v
		}
		if ch, _ := st["channel"].(string); ch != "" {
			m.Channel = ch
		}
		if t, ok := st["template"].(map[string]any); ok {
			md, _ := t["metadata"].(map[string]any)
			tn, _ := md["name"].(string)
			tns, _ := md["namespace"].(string)
			if tn != "" {
				m.Template = tns + "/" + tn
			}
		}
	}
	var out []ClusterModule
	spec, _, _ := unstructured.NestedSlice(obj.Object, "spec", "modules")
	inSpec := map[string]bool{}
	for _, it := range spec {
		e, _ := it.(map[string]any)
		name, _ := e["name"].(string)
		inSpec[name] = true
		m := ClusterModule{Module: name, Template: "-"}
		m.Channel, _ = e["channel"].(string)
		if m.Channel == "" {
			m.Channel = KymaChannel(obj)
		}
		fill(&m, status[name])
		out = append(out, m)
	}
	for _, name := range order {
		if !inSpec[name] {
			m := ClusterModule{Module: name, Template: "-"}
			fill(&m, status[name])
			out = append(out, m)
		}
	}
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
		if (t.GetKind() != KindModuleTemplate && t.GetKind() != KindModuleReleaseMeta) || t.GetAPIVersion() != OperatorAPIVersion {
			return fmt.Errorf("deploy: %s %s is neither a %s nor a %s (%s)", t.GetAPIVersion(), t.GetKind(), KindModuleTemplate, KindModuleReleaseMeta, OperatorAPIVersion)
		}
		if t.GetNamespace() == "" {
			t.SetNamespace(DefaultNamespace)
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
	// Templates before release metas, so a release meta never names a missing template.
	for _, t := range templates {
		if t.GetKind() != KindModuleTemplate {
			continue
		}
		if err := c.apply(ctx, c.dyn.Resource(ModuleTemplateGVR).Namespace(t.GetNamespace()), t); err != nil {
			return err
		}
	}
	for _, m := range templates {
		if m.GetKind() != KindModuleReleaseMeta {
			continue
		}
		merged, err := c.mergeReleaseMeta(ctx, m)
		if err != nil {
			return err
		}
		if err := c.apply(ctx, c.dyn.Resource(ReleaseMetaGVR).Namespace(m.GetNamespace()), merged); err != nil {
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

// setupResources are the kinds ApplyObjects applies (what sets the module manager up).
var setupResources = map[string]schema.GroupVersionResource{
	"v1/ConfigMap":      {Version: "v1", Resource: "configmaps"},
	"v1/Secret":         {Version: "v1", Resource: "secrets"},
	"v1/ServiceAccount": {Version: "v1", Resource: "serviceaccounts"},
	"rbac.authorization.k8s.io/v1/ClusterRoleBinding": {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	"apps/v1/Deployment":                              {Group: "apps", Version: "v1", Resource: "deployments"},
}

// ApplyObjects applies (server-side) ConfigMaps, Secrets, ServiceAccounts, ClusterRoleBindings and
// Deployments, creating their namespaces.
func (c *Cluster) ApplyObjects(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		gvr, ok := setupResources[o.GetAPIVersion()+"/"+o.GetKind()]
		if !ok {
			return fmt.Errorf("apply %s %s: unsupported kind", o.GetAPIVersion(), o.GetKind())
		}
		if o.GetNamespace() == "" {
			if err := c.apply(ctx, c.dyn.Resource(gvr), o); err != nil {
				return err
			}
			continue
		}
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": o.GetNamespace()}}}
		if err := c.apply(ctx, c.dyn.Resource(namespaceGVR), ns); err != nil {
			return err
		}
		if err := c.apply(ctx, c.dyn.Resource(gvr).Namespace(o.GetNamespace()), o); err != nil {
			return err
		}
	}
	return nil
}

// mergeReleaseMeta keeps the channels of a module's release meta on the cluster that the new one
// does not name (templating one version per channel must not drop the other channels); the new
// assignments win.
func (c *Cluster) mergeReleaseMeta(ctx context.Context, m *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	old, err := c.dyn.Resource(ReleaseMetaGVR).Namespace(m.GetNamespace()).Get(ctx, m.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get ModuleReleaseMeta %s/%s: %w", m.GetNamespace(), m.GetName(), err)
	}
	newChannels, ok, _ := unstructured.NestedSlice(m.Object, "spec", "channels")
	if !ok {
		return m, nil
	}
	oldChannels, _, _ := unstructured.NestedSlice(old.Object, "spec", "channels")
	named := map[string]bool{}
	for _, it := range newChannels {
		a, _ := it.(map[string]any)
		ch, _ := a["channel"].(string)
		named[ch] = true
	}
	merged := append([]any(nil), newChannels...)
	for _, it := range oldChannels {
		a, _ := it.(map[string]any)
		ch, _ := a["channel"].(string)
		if !named[ch] {
			merged = append(merged, map[string]any{"channel": ch, "version": a["version"]})
		}
	}
	sort.Slice(merged, func(i, j int) bool {
		return merged[i].(map[string]any)["channel"].(string) < merged[j].(map[string]any)["channel"].(string)
	})
	out := m.DeepCopy()
	if err := unstructured.SetNestedSlice(out.Object, merged, "spec", "channels"); err != nil {
		return nil, err
	}
	return out, nil
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
