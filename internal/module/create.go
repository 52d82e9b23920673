package module

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Labels the descriptor carries so a ModuleTemplate can be made from the published module alone;
// all signed.
const (
	LabelChannel             = "operator.kyma-project.io/channel"
	LabelMandatory           = "operator.kyma-project.io/mandatory"
	LabelTemplateNamespace   = "operator.kyma-project.io/template-namespace"
	LabelTemplateLabels      = "operator.kyma-project.io/template-labels"
	LabelTemplateAnnotations = "operator.kyma-project.io/template-annotations"
	// LabelTemplateName carries the config's resourceName (the ModuleTemplate's name).
	LabelTemplateName = "operator.kyma-project.io/template-name"
	// LabelCustomStateCheck carries the config's customStateCheck (a list of CustomStateCheck).
	LabelCustomStateCheck = "operator.kyma-project.io/custom-state-check"
	MediaTypeYAML         = "application/x-yaml"
	MediaTypeOctetStream  = "application/octet-stream"
)

// Labels and values the real Kyma CLI writes.
const (
	// LabelInternal and LabelBeta are ModuleTemplate labels (lifecycle-manager's api/shared).
	LabelInternal = "operator.kyma-project.io/internal"
	LabelBeta     = "operator.kyma-project.io/beta"
	// LabelSecurityScan (component, version v1) says the module is security-scanned;
	// LabelSecurityScanType (version v1) marks the security config's protecode images.
	LabelSecurityScan     = "security.kyma-project.io/scan"
	LabelSecurityScanType = "scan.security.kyma-project.io/type"
	// LabelRegistryCred holds the match labels of the Secret with the registry's credentials
	// (--registry-cred-selector), on every local resource.
	LabelRegistryCred = "oci-registry-cred"
	// LabelExecutable marks a single-file resource whose file was executable (a blob has no mode).
	LabelExecutable = "kyma-project.io/executable"
	// ResourceTypeDirectory and ResourceTypeFile are the default types of extra resources;
	// ResourceTypeHelmChart is the real CLI's default for -r PATH.
	ResourceTypeDirectory = "directory"
	ResourceTypeFile      = "file"
	ResourceTypeHelmChart = "helm-chart"
)

// DefaultMaxResourceSize bounds one resource's size (a file, or a directory's files together).
const DefaultMaxResourceSize int64 = 1 << 30

// ErrTooLarge is returned for a resource over the size limit.
var ErrTooLarge = errors.New("resource too large")

// CreateOptions say how to build a module.
type CreateOptions struct {
	Config *Config
	// Dir is the module directory the config's paths are relative to; no path may leave it.
	Dir string
	// Registry, if set, is the repository context (base URL) written to the descriptor.
	Registry    string
	NameMapping string
	// Image overrides Config.Image: a pre-existing OCI image referenced (by digest) as the module's
	// image resource; its blobs stay where they are.
	Image string
	// ResolveImage gives an image reference's manifest digest (needed when an image is set).
	ResolveImage func(ctx context.Context, ref string) (digest.Digest, error)
	// RegistryCredSelector is a label selector (k=v,...) of the Secret with the credentials of
	// the registry; its match labels go on every local resource, as the real CLI writes them.
	RegistryCredSelector string
	// MaxResourceSize bounds each resource (default DefaultMaxResourceSize).
	MaxResourceSize int64
}

// Create builds a module's component version. The result depends only on the config, the files'
// contents (and executable bits) and the image's digest: never on time, directory, file order,
// umask or machine. ctx bounds the local work too.
func Create(ctx context.Context, o CreateOptions) (*Artifact, error) {
	c := o.Config
	if err := c.Validate(); err != nil {
		return nil, err
	}
	mapping := o.NameMapping
	if mapping == "" {
		mapping = NameMappingURLPath
	}
	if mapping != NameMappingURLPath && mapping != NameMappingSHA256 {
		return nil, fmt.Errorf("name mapping %q: want %s or %s", mapping, NameMappingURLPath, NameMappingSHA256)
	}
	var credLabels map[string]string
	if o.RegistryCredSelector != "" {
		sel, err := metav1.ParseToLabelSelector(o.RegistryCredSelector)
		if err != nil {
			return nil, fmt.Errorf("registry credentials selector %q: %w", o.RegistryCredSelector, err)
		}
		credLabels = sel.MatchLabels
	}
	p := packer{ctx: ctx, max: o.MaxResourceSize}
	if p.max <= 0 {
		p.max = DefaultMaxResourceSize
	}
	var err error
	if p.root, err = filepath.Abs(o.Dir); err != nil {
		return nil, err
	}
	if p.root, err = filepath.EvalSymlinks(p.root); err != nil {
		return nil, fmt.Errorf("module directory: %w", err)
	}

	a := &Artifact{Blobs: map[digest.Digest]Blob{}}
	cd := &ComponentDescriptor{
		Meta: Meta{SchemaVersion: SchemaVersionV2},
		Component: Component{
			Name:                c.Name,
			Version:             c.Version,
			Provider:            c.Provider,
			RepositoryContexts:  []RepositoryContext{},
			Sources:             []Source{},
			ComponentReferences: []ComponentReference{},
			Resources:           []Resource{},
		},
	}
	if o.Registry != "" {
		cd.AddRepositoryContext(RepositoryContext{Type: RepositoryTypeOCI, BaseURL: o.Registry, ComponentNameMapping: mapping})
	}
	cd.Component.Labels = []Label{
		{Name: LabelChannel, Value: c.Channel, Signing: true},
		{Name: LabelMandatory, Value: c.Mandatory, Signing: true},
		{Name: LabelTemplateNamespace, Value: c.Namespace, Signing: true},
	}
	if labels := c.TemplateLabels(); len(labels) > 0 {
		cd.Component.Labels = append(cd.Component.Labels, Label{Name: LabelTemplateLabels, Value: labels, Signing: true})
	}
	if len(c.Annotations) > 0 {
		cd.Component.Labels = append(cd.Component.Labels, Label{Name: LabelTemplateAnnotations, Value: c.Annotations, Signing: true})
	}
	if c.ResourceName != "" {
		cd.Component.Labels = append(cd.Component.Labels, Label{Name: LabelTemplateName, Value: c.ResourceName, Signing: true})
	}
	if len(c.CustomStateChecks) > 0 {
		cd.Component.Labels = append(cd.Component.Labels, Label{Name: LabelCustomStateCheck, Value: c.CustomStateChecks, Signing: true})
	}

	addYAML := func(name, rel string) ([]byte, error) {
		data, _, err := p.readFile(rel)
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", name, err)
		}
		a.addLocal(cd, name, "yaml", MediaTypeYAML, data, nil)
		return data, nil
	}
	manifest, err := addYAML(ResourceRawManifest, c.Manifest)
	if err != nil {
		return nil, err
	}
	if c.DefaultCR != "" {
		cr, err := addYAML(ResourceDefaultCR, c.DefaultCR)
		if err != nil {
			return nil, err
		}
		if err := ValidateDefaultCR(cr, manifest); err != nil {
			return nil, err
		}
	}
	if c.Security != "" {
		sec, err := addYAML(ResourceSecurity, c.Security)
		if err != nil {
			return nil, err
		}
		if err := addSecurityScan(cd, sec); err != nil {
			return nil, err
		}
	}
	for _, r := range c.Resources {
		data, dir, exec, err := p.pack(r.Path)
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", r.Name, err)
		}
		typ, mediaType := r.Type, MediaTypeOctetStream
		var labels []Label
		if dir {
			mediaType = MediaTypeTarGzip
			if typ == "" {
				typ = ResourceTypeDirectory
			}
		} else {
			if typ == "" {
				typ = ResourceTypeFile
			}
			if exec {
				labels = append(labels, Label{Name: LabelExecutable, Value: true, Signing: true})
			}
		}
		a.addLocal(cd, r.Name, typ, mediaType, data, labels)
	}
	if credLabels != nil {
		for i := range cd.Component.Resources {
			if cd.Component.Resources[i].Access.Type != AccessTypeLocalBlob {
				continue
			}
			cd.Component.Resources[i].Labels = append(cd.Component.Resources[i].Labels, Label{Name: LabelRegistryCred, Value: credLabels})
		}
	}

	image := o.Image
	if image == "" {
		image = c.Image
	}
	if image != "" {
		if o.ResolveImage == nil {
			return nil, fmt.Errorf("image %s: no registry access to resolve its digest", image)
		}
		d, err := o.ResolveImage(ctx, image)
		if err != nil {
			return nil, fmt.Errorf("resolve image %s: %w", image, err)
		}
		cd.Component.Resources = append(cd.Component.Resources, Resource{
			Name: ModuleName(c.Name), Type: ResourceTypeImage, Version: c.Version, Relation: "external",
			Access: Access{Type: AccessTypeOCIRegistry, ImageReference: imageByDigest(image, d)},
			Digest: &DigestSpec{HashAlgorithm: HashSHA256, NormalisationAlgorithm: NormalisationOCIArtifact, Value: d.Encoded()},
		})
	}
	a.Descriptor = cd
	return a, nil
}

func (a *Artifact) addLocal(cd *ComponentDescriptor, name, typ, mediaType string, data []byte, labels []Label) {
	d := digest.FromBytes(data)
	a.Blobs[d] = Blob{MediaType: mediaType, Data: data}
	cd.Component.Resources = append(cd.Component.Resources, Resource{
		Name: name, Type: typ, Version: cd.Component.Version, Relation: "local", Labels: labels,
		Access: Access{Type: AccessTypeLocalBlob, LocalReference: d.String(), MediaType: mediaType},
		Digest: &DigestSpec{HashAlgorithm: HashSHA256, NormalisationAlgorithm: NormalisationGenericBlob, Value: d.Encoded()},
	})
}

// securityScanConfig is the part of the security scanners config the real CLI reads.
type securityScanConfig struct {
	ModuleName string   `json:"module-name"`
	Protecode  []string `json:"protecode"`
}

// addSecurityScan does what the real CLI does with a security config: the component label
// security.kyma-project.io/scan: enabled, and every protecode image as an external ociImage
// resource (name and version from the image reference) labelled as a third-party image.
// (The real CLI also labels git sources; this CLI adds no sources.)
func addSecurityScan(cd *ComponentDescriptor, data []byte) error {
	var sec securityScanConfig
	if err := yaml.Unmarshal(data, &sec); err != nil {
		return fmt.Errorf("security config: %w", err)
	}
	cd.Component.Labels = append(cd.Component.Labels, Label{Name: LabelSecurityScan, Value: "enabled", Version: "v1"})
	for _, img := range sec.Protecode {
		repo, tag, ok := strings.Cut(img, ":")
		if !ok || strings.Contains(tag, ":") || repo == "" || tag == "" {
			return fmt.Errorf("security config: protecode image %q: want REPOSITORY:TAG", img)
		}
		cd.Component.Resources = append(cd.Component.Resources, Resource{
			Name: repo[strings.LastIndex(repo, "/")+1:], Version: tag, Type: ResourceTypeImage, Relation: "external",
			Labels: []Label{{Name: LabelSecurityScanType, Value: "third-party-image", Version: "v1"}},
			Access: Access{Type: AccessTypeOCIRegistry, ImageReference: img},
		})
	}
	return nil
}
