package module

import (
	"encoding/json"
	"fmt"

	"github.com/opencontainers/go-digest"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// ModuleTemplate identity and labels (operator.kyma-project.io/v1beta2).
const (
	OperatorAPIVersion   = "operator.kyma-project.io/v1beta2"
	KindModuleTemplate   = "ModuleTemplate"
	KindKyma             = "Kyma"
	LabelModuleName      = "operator.kyma-project.io/module-name"
	AnnotationModuleVers = "operator.kyma-project.io/module-version"
)

// TemplateOptions override what the descriptor says.
type TemplateOptions struct {
	// Channel overrides the module's channel.
	Channel string
	// Namespace overrides the module's template namespace.
	Namespace string
	// Registry gives the repository context when the descriptor has none (a module created
	// without --registry and pushed later).
	Registry    string
	NameMapping string
}

// Template makes the ModuleTemplate of a component version: its channel, the default CR as data,
// the descriptor, and the module-name label.
func Template(a *Artifact, o TemplateOptions) (*unstructured.Unstructured, error) {
	cd := *a.Descriptor
	comp := cd.Component
	if len(comp.RepositoryContexts) == 0 {
		if o.Registry == "" {
			return nil, fmt.Errorf("template %s:%s: the descriptor names no registry; give one", comp.Name, comp.Version)
		}
		mapping := o.NameMapping
		if mapping == "" {
			mapping = NameMappingURLPath
		}
		comp.RepositoryContexts = []RepositoryContext{{Type: RepositoryTypeOCI, BaseURL: o.Registry, ComponentNameMapping: mapping}}
		cd.Component = comp
	}
	channel := o.Channel
	if channel == "" {
		channel = cd.labelString(LabelChannel)
	}
	if channel == "" {
		channel = DefaultChannel
	}
	if !channelName.MatchString(channel) {
		return nil, fmt.Errorf("channel %q: 3 to 32 lower-case letters", channel)
	}
	ns := o.Namespace
	if ns == "" {
		ns = cd.labelString(LabelTemplateNamespace)
	}
	if ns == "" {
		ns = DefaultNamespace
	}
	name := ModuleName(comp.Name)

	descriptor, err := toObject(&cd)
	if err != nil {
		return nil, err
	}
	spec := map[string]any{
		"channel":    channel,
		"mandatory":  cd.labelString(LabelMandatory) == "true",
		"moduleName": name,
		"version":    comp.Version,
		"descriptor": descriptor,
	}
	if r := cd.Resource(ResourceDefaultCR); r != nil {
		b, ok := a.Blobs[digest.Digest(r.Access.LocalReference)]
		if !ok {
			return nil, fmt.Errorf("template %s: default CR layer %s missing", comp.Name, r.Access.LocalReference)
		}
		var data map[string]any
		if err := yaml.Unmarshal(b.Data, &data); err != nil {
			return nil, fmt.Errorf("template %s: default CR: %w", comp.Name, err)
		}
		spec["data"] = data
	}
	labels := map[string]any{LabelModuleName: name}
	for k, v := range labelMap(&cd, LabelTemplateLabels) {
		labels[k] = v
	}
	annotations := map[string]any{AnnotationModuleVers: comp.Version}
	for k, v := range labelMap(&cd, LabelTemplateAnnotations) {
		annotations[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": OperatorAPIVersion,
		"kind":       KindModuleTemplate,
		"metadata": map[string]any{
			"name": name + "-" + channel, "namespace": ns,
			"labels": labels, "annotations": annotations,
		},
		"spec": spec,
	}}, nil
}

// TemplateYAML is Template as YAML.
func TemplateYAML(a *Artifact, o TemplateOptions) ([]byte, error) {
	t, err := Template(a, o)
	if err != nil {
		return nil, err
	}
	return yaml.Marshal(t.Object)
}

func labelMap(cd *ComponentDescriptor, name string) map[string]string {
	for _, l := range cd.Component.Labels {
		if l.Name != name {
			continue
		}
		out := map[string]string{}
		if m, ok := l.Value.(map[string]any); ok {
			for k, v := range m {
				out[k] = fmt.Sprint(v)
			}
		}
		if m, ok := l.Value.(map[string]string); ok {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	return nil
}

// toObject turns a value into JSON-compatible maps (what unstructured objects hold).
func toObject(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// DescriptorFromTemplate reads the descriptor a ModuleTemplate carries.
func DescriptorFromTemplate(t *unstructured.Unstructured) (*ComponentDescriptor, error) {
	d, ok, err := unstructured.NestedMap(t.Object, "spec", "descriptor")
	if err != nil || !ok {
		return nil, fmt.Errorf("ModuleTemplate %s/%s has no spec.descriptor", t.GetNamespace(), t.GetName())
	}
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	return ParseDescriptor(raw)
}
