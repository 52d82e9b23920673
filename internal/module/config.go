package module

import (
	"fmt"
	"os"
	"path"

	"github.com/kyma-project/kyma-environment-broker/internal/module/modulespec"
	"sigs.k8s.io/yaml"
	yamlv3 "sigs.k8s.io/yaml/goyaml.v3"
)

// Config is a module config file (kyma alpha create module --module-config-file), with the
// fields of the real Kyma CLI's module config.
type Config struct {
	// Name is the component name, e.g. kyma-project.io/module/sample; its last element is the
	// module's name (the ModuleTemplate's module-name label).
	Name    string `json:"name"`
	Version string `json:"version"`
	Channel string `json:"channel"`
	// Manifest, DefaultCR and Security are files relative to the module directory.
	Manifest  string `json:"manifest"`
	DefaultCR string `json:"defaultCR,omitempty"`
	Mandatory bool   `json:"mandatory,omitempty"`
	// ResourceName names the ModuleTemplate (the real CLI's default: <module>-<channel>).
	ResourceName string `json:"resourceName,omitempty"`
	Namespace    string `json:"namespace,omitempty"`
	// Security is the security scanners config: as the real CLI does, it enables the scan label
	// and adds its protecode images as resources; the file is also kept as a resource.
	Security string `json:"security,omitempty"`
	// Internal and Beta become the ModuleTemplate labels operator.kyma-project.io/internal and
	// operator.kyma-project.io/beta ("true"), as the real CLI writes them.
	Internal bool              `json:"internal,omitempty"`
	Beta     bool              `json:"beta,omitempty"`
	Provider string            `json:"provider,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	// Annotations go to the ModuleTemplate.
	Annotations map[string]string `json:"annotations,omitempty"`
	// CustomStateChecks go to the ModuleTemplate's spec.customStateCheck.
	CustomStateChecks []CustomStateCheck `json:"customStateCheck,omitempty"`
	// Resources are further files or directories added as local blobs (directories as tar.gz).
	Resources []ResourceConfig `json:"resources,omitempty"`
	// Image is a pre-existing OCI image referenced as the module's image resource.
	Image string `json:"image,omitempty"`
}

// ResourceConfig is one extra resource of a module.
type ResourceConfig struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Type string `json:"type,omitempty"`
}

// Defaults of a module config.
const (
	DefaultChannel   = "regular"
	DefaultNamespace = "kcp-system"
	DefaultProvider  = "internal"
)

var (
	resourceName = modulespec.ResourceName
	channelName  = modulespec.ChannelName
)

// LoadConfig reads and checks a module config file, filling in defaults.
func LoadConfig(file string) (*Config, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read module config: %w", err)
	}
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("parse module config %s: %w", file, err)
	}
	// Scalars as written: "version: 1.0" is the string 1.0, not the number 1.
	if err := rawScalars(data, map[string]*string{"version": &c.Version, "name": &c.Name, "channel": &c.Channel}); err != nil {
		return nil, fmt.Errorf("parse module config %s: %w", file, err)
	}
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("module config %s: %w", file, err)
	}
	return &c, nil
}

func (c *Config) applyDefaults() {
	if c.Channel == "" {
		c.Channel = DefaultChannel
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.Provider == "" {
		c.Provider = DefaultProvider
	}
}

// rawScalars sets each named top-level key's scalar exactly as the YAML writes it.
func rawScalars(data []byte, keys map[string]*string) error {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return err
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yamlv3.MappingNode {
		return nil
	}
	m := doc.Content[0].Content
	for i := 0; i+1 < len(m); i += 2 {
		if dst, ok := keys[m[i].Value]; ok && m[i+1].Kind == yamlv3.ScalarNode && m[i+1].Tag != "!!null" {
			*dst = m[i+1].Value
		}
	}
	return nil
}

// Validate checks the config's fields, before anything is built, written or pushed: the
// component name as OCM, the version as semver, channel, namespace, labels and annotations as
// Kubernetes and lifecycle-manager take them, and custom state checks as the Kyma CLI does.
func (c *Config) Validate() error {
	if err := ValidateComponentName(c.Name); err != nil {
		return err
	}
	if err := ValidateVersion(c.Version); err != nil {
		return err
	}
	if err := ValidateChannel(c.Channel); err != nil {
		return err
	}
	if c.Namespace != "" {
		if err := ValidateNamespace(c.Namespace); err != nil {
			return err
		}
	}
	if c.ResourceName != "" && len(c.ResourceName) > 253 {
		return invalid("resourceName %q: at most 253 characters", c.ResourceName)
	}
	if err := ValidateLabels(c.Labels); err != nil {
		return err
	}
	if err := ValidateAnnotationKeys(c.Annotations); err != nil {
		return err
	}
	if err := ValidateCustomStateChecks(c.CustomStateChecks); err != nil {
		return err
	}
	if c.Manifest == "" {
		return fmt.Errorf("manifest is required")
	}
	seen := map[string]bool{ResourceRawManifest: true, ResourceDefaultCR: true, ResourceSecurity: true, ModuleName(c.Name): true}
	for i, r := range c.Resources {
		if !resourceName.MatchString(r.Name) {
			return fmt.Errorf("resources[%d]: name %q: lower-case letters, digits and dashes", i, r.Name)
		}
		if seen[r.Name] {
			return fmt.Errorf("resources[%d]: name %q is used twice or reserved", i, r.Name)
		}
		seen[r.Name] = true
		if r.Path == "" {
			return fmt.Errorf("resources[%d]: path is required", i)
		}
	}
	return nil
}

// TemplateLabels are the labels the ModuleTemplate gets from the config: the config's labels
// and, as the real CLI writes them, the internal and beta flags.
func (c *Config) TemplateLabels() map[string]string {
	out := map[string]string{}
	for k, v := range c.Labels {
		out[k] = v
	}
	if c.Internal {
		out[LabelInternal] = "true"
	}
	if c.Beta {
		out[LabelBeta] = "true"
	}
	return out
}

// ModuleName is a component's short name: the last element of its path.
func ModuleName(component string) string {
	return path.Base(component)
}
