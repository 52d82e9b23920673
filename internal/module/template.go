package module

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// ModuleTemplate identity and labels (operator.kyma-project.io/v1beta2).
const (
	OperatorAPIVersion    = "operator.kyma-project.io/v1beta2"
	KindModuleTemplate    = "ModuleTemplate"
	KindModuleReleaseMeta = "ModuleReleaseMeta"
	KindKyma              = "Kyma"
	LabelModuleName       = "operator.kyma-project.io/module-name"
	AnnotationModuleVers  = "operator.kyma-project.io/module-version"
)

// ValidateTemplateFields checks a module name and version as lifecycle-manager's ModuleTemplate
// and ModuleReleaseMeta CRDs do (validate.go), so a template is refused here rather than by the
// cluster.
func ValidateTemplateFields(module, version string) error {
	if err := ValidateTemplateModuleName(module); err != nil {
		return err
	}
	return ValidateTemplateVersion(version)
}

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
	// ChannelNamed makes the template of older lifecycle-managers: named <module>-<channel>, with
	// spec.channel, and no ModuleReleaseMeta. Without it the template is named
	// <module>-<version> and a ModuleReleaseMeta assigns the version to the channel.
	ChannelNamed bool
}

// templateParams are a template's resolved identity.
type templateParams struct {
	cd                         ComponentDescriptor
	module, channel, namespace string
}

func resolveTemplate(a *Artifact, o TemplateOptions) (*templateParams, error) {
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
	if err := ValidateTemplateFields(name, comp.Version); err != nil {
		return nil, fmt.Errorf("template %s:%s: %w", comp.Name, comp.Version, err)
	}
	return &templateParams{cd: cd, module: name, channel: channel, namespace: ns}, nil
}

// TemplateName is the name lifecycle-manager looks a module's template up by.
func TemplateName(module, version string) string { return module + "-" + version }

// Template makes the ModuleTemplate of a component version: the default CR as data, the
// descriptor, the module-name label; named <module>-<version> (or, with ChannelNamed,
// <module>-<channel> with spec.channel).
func Template(a *Artifact, o TemplateOptions) (*unstructured.Unstructured, error) {
	p, err := resolveTemplate(a, o)
	if err != nil {
		return nil, err
	}
	cd, comp := p.cd, p.cd.Component
	descriptor, err := toObject(&cd)
	if err != nil {
		return nil, err
	}
	spec := map[string]any{
		"mandatory":  cd.labelString(LabelMandatory) == "true",
		"moduleName": p.module,
		"version":    comp.Version,
		"descriptor": descriptor,
	}
	name := TemplateName(p.module, comp.Version)
	if o.ChannelNamed {
		spec["channel"] = p.channel
		name = p.module + "-" + p.channel
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
	labels := map[string]any{LabelModuleName: p.module}
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
			"name": name, "namespace": p.namespace,
			"labels": labels, "annotations": annotations,
		},
		"spec": spec,
	}}, nil
}

// ReleaseMeta makes the ModuleReleaseMeta that assigns the component version to its channel
// (spec.mandatory instead for a mandatory module): named after the module, in the template's
// namespace, where lifecycle-manager looks for it.
func ReleaseMeta(a *Artifact, o TemplateOptions) (*unstructured.Unstructured, error) {
	p, err := resolveTemplate(a, o)
	if err != nil {
		return nil, err
	}
	comp := p.cd.Component
	spec := map[string]any{
		"moduleName":       p.module,
		"ocmComponentName": comp.Name,
	}
	if p.cd.labelString(LabelMandatory) == "true" {
		spec["mandatory"] = map[string]any{"version": comp.Version}
	} else {
		spec["channels"] = []any{map[string]any{"channel": p.channel, "version": comp.Version}}
	}
	labels := labelMap(&p.cd, LabelTemplateLabels)
	spec["beta"] = labels[LabelBeta] == "true"
	spec["internal"] = labels[LabelInternal] == "true"
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": OperatorAPIVersion,
		"kind":       KindModuleReleaseMeta,
		"metadata":   map[string]any{"name": p.module, "namespace": p.namespace},
		"spec":       spec,
	}}, nil
}

// TemplateObjects are what a cluster needs to offer the module: the ModuleReleaseMeta and the
// version-named ModuleTemplate, or with ChannelNamed only the channel-named template.
func TemplateObjects(a *Artifact, o TemplateOptions) ([]*unstructured.Unstructured, error) {
	t, err := Template(a, o)
	if err != nil {
		return nil, err
	}
	if o.ChannelNamed {
		return []*unstructured.Unstructured{t}, nil
	}
	m, err := ReleaseMeta(a, o)
	if err != nil {
		return nil, err
	}
	return []*unstructured.Unstructured{m, t}, nil
}

// TemplateYAML is TemplateObjects as a multi-document YAML.
func TemplateYAML(a *Artifact, o TemplateOptions) ([]byte, error) {
	objs, err := TemplateObjects(a, o)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for i, obj := range objs {
		if i > 0 {
			out.WriteString("---\n")
		}
		data, err := yaml.Marshal(obj.Object)
		if err != nil {
			return nil, err
		}
		out.Write(data)
	}
	return out.Bytes(), nil
}

// ReadObjects parses a multi-document YAML (or JSON) into objects, skipping empty documents.
func ReadObjects(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for i := 0; ; i++ {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
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
