// Package modulespec holds the Kyma resource's module entry and the keys that carry it through the
// provisioner. It has no dependencies beyond apimachinery's unstructured objects, so the broker, the
// provisioner and the runtime agent can name a module without linking the module CLI's OCI stack.
package modulespec

import (
	"encoding/json"
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Custom resource policies of a module entry.
const (
	PolicyCreateAndDel = "CreateAndDelete"
	PolicyIgnore       = "Ignore"
)

// Component configuration keys that carry a module's channel and custom resource policy from the
// broker through the provisioner's Kyma components (each component is a module) into the Kyma
// resource's spec.modules.
const (
	ConfigKeyChannel              = "kyma-module.channel"
	ConfigKeyCustomResourcePolicy = "kyma-module.customResourcePolicy"
)

var (
	// ResourceName is a Kubernetes resource name (DNS-1123 label characters).
	ResourceName = regexp.MustCompile(`^[a-z0-9]([a-z0-9\-]*[a-z0-9])?$`)
	// ChannelName is a module channel.
	ChannelName = regexp.MustCompile(`^[a-z]{3,32}$`)
)

// ModuleSpec is an entry of the Kyma resource's spec.modules.
type ModuleSpec struct {
	Name                 string `json:"name"`
	Channel              string `json:"channel,omitempty"`
	CustomResourcePolicy string `json:"customResourcePolicy,omitempty"`
}

// Validate checks the entry.
func (m ModuleSpec) Validate() error {
	if !ResourceName.MatchString(m.Name) {
		return fmt.Errorf("module name %q: lower-case letters, digits and dashes", m.Name)
	}
	if m.Channel != "" && !ChannelName.MatchString(m.Channel) {
		return fmt.Errorf("channel %q: 3 to 32 lower-case letters", m.Channel)
	}
	switch m.CustomResourcePolicy {
	case "", PolicyCreateAndDel, PolicyIgnore:
		return nil
	}
	return fmt.Errorf("policy %q: want %s or %s", m.CustomResourcePolicy, PolicyCreateAndDel, PolicyIgnore)
}

// KymaModules reads a Kyma resource's spec.modules.
func KymaModules(obj *unstructured.Unstructured) ([]ModuleSpec, error) {
	raw, ok, err := unstructured.NestedFieldNoCopy(obj.Object, "spec", "modules")
	if err != nil || !ok || raw == nil {
		return nil, err
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var mods []ModuleSpec
	if err := json.Unmarshal(data, &mods); err != nil {
		return nil, fmt.Errorf("Kyma %s/%s: spec.modules: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return mods, nil
}
