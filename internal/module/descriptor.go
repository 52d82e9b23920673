// Package module builds, signs, publishes and deploys Kyma modules: OCM component versions
// (component descriptor v2) stored as OCI artifacts in the layout Kyma's lifecycle manager reads
// (<registry>/component-descriptors/<component>:<version>), ModuleTemplates made from them, and
// edits of the Kyma resource's spec.modules. The OCM Go library is not on the module proxy, so the
// descriptor types are ours, kept to the published component descriptor v2 schema.
package module

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// Media types of the OCM OCI mapping (component descriptor v2 in OCI).
const (
	MediaTypeComponentConfig     = "application/vnd.gardener.cloud.cnudie.component.config.v1+json"
	MediaTypeDescriptorLayer     = "application/vnd.gardener.cloud.cnudie.component-descriptor.v2+yaml+tar"
	MediaTypeTarGzip             = "application/x-tar+gzip"
	DescriptorFileName           = "component-descriptor.yaml"
	SchemaVersionV2              = "v2"
	AccessTypeLocalBlob          = "localBlob"
	AccessTypeOCIRegistry        = "ociRegistry"
	RepositoryTypeOCI            = "ociRegistry"
	NameMappingURLPath           = "urlPath"
	NameMappingSHA256            = "sha256-digest"
	HashSHA256                   = "SHA-256"
	HashSHA512                   = "SHA-512"
	NormalisationGenericBlob     = "genericBlobDigest/v1"
	NormalisationOCIArtifact     = "ociArtifactDigest/v1"
	NormalisationJSONV1          = "jsonNormalisation/v1"
	SignatureAlgorithmRSAPKCS1v5 = "RSASSA-PKCS1-V1_5"
	MediaTypeRSASignature        = "application/vnd.ocm.signature.rsa"
	ResourceTypeImage            = "ociImage"
	ResourceRawManifest          = "raw-manifest"
	ResourceDefaultCR            = "default-cr"
	ResourceSecurity             = "security-config"
)

// ComponentDescriptor is an OCM component descriptor, schema v2. Every type keeps the fields it
// does not know in Extra and writes them back, so a descriptor made by OCM or another tool
// (globalAccess, referenceName, git sources, ...) survives a re-write (sign, push) unchanged.
type ComponentDescriptor struct {
	Meta          Meta        `json:"meta"`
	Component     Component   `json:"component"`
	Signatures    []Signature `json:"signatures,omitempty"`
	NestedDigests any         `json:"nestedDigests,omitempty"`
	Extra         Extra       `json:"-"`
}

// Meta carries the schema version.
type Meta struct {
	SchemaVersion string `json:"schemaVersion"`
	Extra         Extra  `json:"-"`
}

// Component is one version of a component. Provider is a name, or (OCM, provider with labels)
// the JSON of {"name":..., "labels":[...]} as a string.
type Component struct {
	Name                string               `json:"name"`
	Version             string               `json:"version"`
	Labels              []Label              `json:"labels,omitempty"`
	CreationTime        string               `json:"creationTime,omitempty"`
	Provider            string               `json:"provider"`
	RepositoryContexts  []RepositoryContext  `json:"repositoryContexts"`
	Sources             []Source             `json:"sources"`
	ComponentReferences []ComponentReference `json:"componentReferences"`
	Resources           []Resource           `json:"resources"`
	Extra               Extra                `json:"-"`
}

// Label is a named value; Signing includes it in the signature.
type Label struct {
	Name    string `json:"name"`
	Value   any    `json:"value"`
	Version string `json:"version,omitempty"`
	Signing bool   `json:"signing,omitempty"`
	Merge   any    `json:"merge,omitempty"`
	Extra   Extra  `json:"-"`
}

// RepositoryContext names the OCI registry a component version lives in (OCM also writes
// subPath, kept in Extra).
type RepositoryContext struct {
	Type                 string `json:"type"`
	BaseURL              string `json:"baseUrl"`
	ComponentNameMapping string `json:"componentNameMapping"`
	Extra                Extra  `json:"-"`
}

// Source is a source the component was built from.
type Source struct {
	Name          string            `json:"name"`
	Version       string            `json:"version"`
	ExtraIdentity map[string]string `json:"extraIdentity,omitempty"`
	Labels        []Label           `json:"labels,omitempty"`
	Type          string            `json:"type"`
	Access        *Access           `json:"access"`
	Extra         Extra             `json:"-"`
}

// ComponentReference refers to another component version.
type ComponentReference struct {
	Name          string            `json:"name"`
	Version       string            `json:"version"`
	ExtraIdentity map[string]string `json:"extraIdentity,omitempty"`
	Labels        []Label           `json:"labels,omitempty"`
	ComponentName string            `json:"componentName"`
	Digest        *DigestSpec       `json:"digest,omitempty"`
	Extra         Extra             `json:"-"`
}

// Resource is an artifact of the component: a local blob (a layer of the component's own OCI
// artifact) or an external OCI image.
type Resource struct {
	Name          string            `json:"name"`
	Version       string            `json:"version"`
	ExtraIdentity map[string]string `json:"extraIdentity,omitempty"`
	Labels        []Label           `json:"labels,omitempty"`
	Type          string            `json:"type"`
	Relation      string            `json:"relation,omitempty"`
	SourceRefs    any               `json:"srcRefs,omitempty"`
	Access        Access            `json:"access"`
	Digest        *DigestSpec       `json:"digest,omitempty"`
	Extra         Extra             `json:"-"`
}

// Access says where a resource's content is; fields of other access types (globalAccess,
// referenceName, repository, commit, ...) are kept in Extra.
type Access struct {
	Type           string `json:"type"`
	LocalReference string `json:"localReference,omitempty"`
	MediaType      string `json:"mediaType,omitempty"`
	ImageReference string `json:"imageReference,omitempty"`
	Extra          Extra  `json:"-"`
}

// DigestSpec is a digest with how it was computed.
type DigestSpec struct {
	HashAlgorithm          string `json:"hashAlgorithm"`
	NormalisationAlgorithm string `json:"normalisationAlgorithm"`
	Value                  string `json:"value"`
}

// Signature is an OCM signature over the normalised descriptor.
type Signature struct {
	Name      string        `json:"name"`
	Digest    DigestSpec    `json:"digest"`
	Signature SignatureSpec `json:"signature"`
	Timestamp any           `json:"timestamp,omitempty"`
	Extra     Extra         `json:"-"`
}

// SignatureSpec is the signature value.
type SignatureSpec struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"value"`
	MediaType string `json:"mediaType"`
	Issuer    string `json:"issuer,omitempty"`
	Extra     Extra  `json:"-"`
}

// MarshalYAML gives the descriptor's YAML (keys sorted, so deterministic).
func (cd *ComponentDescriptor) MarshalYAML() ([]byte, error) {
	return yaml.Marshal(cd)
}

// ParseDescriptor reads a descriptor (YAML or JSON) and checks its schema version.
func ParseDescriptor(data []byte) (*ComponentDescriptor, error) {
	var cd ComponentDescriptor
	// Lenient: OCM's schema has more than this package uses, and tools add fields; unknown
	// fields are kept (Extra), never refused.
	if err := yaml.Unmarshal(data, &cd); err != nil {
		return nil, fmt.Errorf("parse component descriptor: %w", err)
	}
	if cd.Meta.SchemaVersion != SchemaVersionV2 {
		return nil, fmt.Errorf("component descriptor schema version %q, want %q", cd.Meta.SchemaVersion, SchemaVersionV2)
	}
	if cd.Component.Name == "" || cd.Component.Version == "" {
		return nil, fmt.Errorf("component descriptor without name or version")
	}
	return &cd, nil
}

// Resource returns the named resource, or nil.
func (cd *ComponentDescriptor) Resource(name string) *Resource {
	for i := range cd.Component.Resources {
		if cd.Component.Resources[i].Name == name {
			return &cd.Component.Resources[i]
		}
	}
	return nil
}

// EffectiveRepositoryContext is the repository context the component version is read from: the
// last one (OCM appends one on every transfer to another repository), nil when there is none.
func (cd *ComponentDescriptor) EffectiveRepositoryContext() *RepositoryContext {
	rcs := cd.Component.RepositoryContexts
	if len(rcs) == 0 {
		return nil
	}
	return &rcs[len(rcs)-1]
}

// AddRepositoryContext appends rc unless it is already the effective one (as OCM does); it says
// whether it appended.
func (cd *ComponentDescriptor) AddRepositoryContext(rc RepositoryContext) bool {
	if eff := cd.EffectiveRepositoryContext(); eff != nil && sameRepositoryContext(*eff, rc) {
		return false
	}
	cd.Component.RepositoryContexts = append(cd.Component.RepositoryContexts, rc)
	return true
}

// sameRepositoryContext compares two contexts; OCM's type is OCIRegistry, its legacy spelling
// ociRegistry, and an empty mapping means urlPath.
func sameRepositoryContext(a, b RepositoryContext) bool {
	mapping := func(m string) string {
		if m == "" {
			return NameMappingURLPath
		}
		return m
	}
	return strings.EqualFold(a.Type, b.Type) && strings.TrimSuffix(a.BaseURL, "/") == strings.TrimSuffix(b.BaseURL, "/") &&
		mapping(a.ComponentNameMapping) == mapping(b.ComponentNameMapping)
}
