package module

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
)

// Labels the descriptor carries so a ModuleTemplate can be made from the published module alone;
// all signed.
const (
	LabelChannel             = "operator.kyma-project.io/channel"
	LabelMandatory           = "operator.kyma-project.io/mandatory"
	LabelTemplateNamespace   = "operator.kyma-project.io/template-namespace"
	LabelTemplateLabels      = "operator.kyma-project.io/template-labels"
	LabelTemplateAnnotations = "operator.kyma-project.io/template-annotations"
	MediaTypeYAML            = "application/x-yaml"
)

// CreateOptions say how to build a module.
type CreateOptions struct {
	Config *Config
	// Dir is the module directory the config's paths are relative to.
	Dir string
	// Registry, if set, is the repository context (host[:port][/prefix]) written to the descriptor.
	Registry    string
	NameMapping string
	// Image overrides Config.Image: a pre-existing OCI image referenced (by digest) as the module's
	// image resource; its blobs stay where they are.
	Image string
	// ResolveImage gives an image reference's manifest digest (needed when an image is set).
	ResolveImage func(ctx context.Context, ref string) (digest.Digest, error)
}

// Create builds a module's component version. The result depends only on the config, the files'
// contents and the image's digest: never on time, directory, file order, umask or machine.
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
		cd.Component.RepositoryContexts = append(cd.Component.RepositoryContexts, RepositoryContext{
			Type: RepositoryTypeOCI, BaseURL: o.Registry, ComponentNameMapping: mapping,
		})
	}
	cd.Component.Labels = []Label{
		{Name: LabelChannel, Value: c.Channel, Signing: true},
		{Name: LabelMandatory, Value: c.Mandatory, Signing: true},
		{Name: LabelTemplateNamespace, Value: c.Namespace, Signing: true},
	}
	if len(c.Labels) > 0 {
		cd.Component.Labels = append(cd.Component.Labels, Label{Name: LabelTemplateLabels, Value: c.Labels, Signing: true})
	}
	if len(c.Annotations) > 0 {
		cd.Component.Labels = append(cd.Component.Labels, Label{Name: LabelTemplateAnnotations, Value: c.Annotations, Signing: true})
	}

	addFile := func(name, typ, rel string) error {
		data, err := os.ReadFile(filepath.Join(o.Dir, rel))
		if err != nil {
			return fmt.Errorf("resource %s: %w", name, err)
		}
		a.addLocal(cd, name, typ, MediaTypeYAML, data)
		return nil
	}
	if err := addFile(ResourceRawManifest, "yaml", c.Manifest); err != nil {
		return nil, err
	}
	if c.DefaultCR != "" {
		if err := addFile(ResourceDefaultCR, "yaml", c.DefaultCR); err != nil {
			return nil, err
		}
	}
	if c.Security != "" {
		if err := addFile(ResourceSecurity, "yaml", c.Security); err != nil {
			return nil, err
		}
	}
	for _, r := range c.Resources {
		data, err := tarGzipPath(filepath.Join(o.Dir, r.Path))
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", r.Name, err)
		}
		typ := r.Type
		if typ == "" {
			typ = "directory"
		}
		a.addLocal(cd, r.Name, typ, MediaTypeTarGzip, data)
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

func (a *Artifact) addLocal(cd *ComponentDescriptor, name, typ, mediaType string, data []byte) {
	d := digest.FromBytes(data)
	a.Blobs[d] = Blob{MediaType: mediaType, Data: data}
	cd.Component.Resources = append(cd.Component.Resources, Resource{
		Name: name, Type: typ, Version: cd.Component.Version, Relation: "local",
		Access: Access{Type: AccessTypeLocalBlob, LocalReference: d.String(), MediaType: mediaType},
		Digest: &DigestSpec{HashAlgorithm: HashSHA256, NormalisationAlgorithm: NormalisationGenericBlob, Value: d.Encoded()},
	})
}
