package module

import (
	"fmt"
	"os"
	"path"
	"regexp"

	"github.com/kyma-project/kyma-environment-broker/internal/module/modulespec"
	"sigs.k8s.io/yaml"
)

// Config is a module config file (kyma alpha create module --module-config-file).
type Config struct {
	// Name is the component name, e.g. kyma-project.io/module/sample; its last element is the
	// module's name (the ModuleTemplate's module-name label).
	Name    string `json:"name"`
	Version string `json:"version"`
	Channel string `json:"channel"`
	// Manifest, DefaultCR and Security are files relative to the module directory.
	Manifest  string            `json:"manifest"`
	DefaultCR string            `json:"defaultCR,omitempty"`
	Mandatory bool              `json:"mandatory,omitempty"`
	Namespace string            `json:"namespace,omitempty"`
	Security  string            `json:"security,omitempty"`
	Provider  string            `json:"provider,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	// Annotations go to the ModuleTemplate.
	Annotations map[string]string `json:"annotations,omitempty"`
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
	componentName = regexp.MustCompile(`^[a-z0-9.\-]+[.][a-z]{2,}(/[a-z0-9\-_.]+)+$`)
	semver        = regexp.MustCompile(`^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.\-]+)?(\+[0-9A-Za-z.\-]+)?$`)
	resourceName  = modulespec.ResourceName
	channelName   = modulespec.ChannelName
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
	if c.Channel == "" {
		c.Channel = DefaultChannel
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.Provider == "" {
		c.Provider = DefaultProvider
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("module config %s: %w", file, err)
	}
	return &c, nil
}

// Validate checks the config's fields.
func (c *Config) Validate() error {
	if !componentName.MatchString(c.Name) {
		return fmt.Errorf("name %q is not a component name like kyma-project.io/module/sample", c.Name)
	}
	if !semver.MatchString(c.Version) {
		return fmt.Errorf("version %q is not a semantic version", c.Version)
	}
	if !channelName.MatchString(c.Channel) {
		return fmt.Errorf("channel %q: 3 to 32 lower-case letters", c.Channel)
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

// ModuleName is a component's short name: the last element of its path.
func ModuleName(component string) string {
	return path.Base(component)
}
