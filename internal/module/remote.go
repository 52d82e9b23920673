package module

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sirupsen/logrus"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/errcode"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// DescriptorsRepository is the repository (under the registry's prefix) that holds component
// descriptors, as Kyma's lifecycle manager reads them.
const DescriptorsRepository = "component-descriptors"

// ErrExists is returned when a version already exists with other content.
var ErrExists = errors.New("already exists with other content")

// RegistryOptions say how to reach an OCI registry.
type RegistryOptions struct {
	// Registry is host[:port][/prefix].
	Registry string
	// Insecure uses plain HTTP.
	Insecure bool
	// CAFile adds a CA certificate (PEM) to the system's for HTTPS.
	CAFile string
	// Username and Password are basic auth credentials; without them the docker config
	// (DOCKER_CONFIG or ~/.docker/config.json) is asked.
	Username, Password string
	// NameMapping maps component names to repositories: urlPath (default) or sha256-digest.
	NameMapping string
	// Timeout bounds each HTTP request (default 2 minutes).
	Timeout time.Duration
	// MaxResourceSize bounds each layer read (default DefaultMaxResourceSize).
	MaxResourceSize int64
}

// Registry is an OCI registry holding component versions.
type Registry struct {
	host, prefix string
	plainHTTP    bool
	mapping      string
	max          int64
	client       *auth.Client
	log          logrus.FieldLogger
}

// NewRegistry prepares access to a registry (no request is made yet).
func NewRegistry(o RegistryOptions, log logrus.FieldLogger) (*Registry, error) {
	if o.Registry == "" {
		return nil, errors.New("no registry given")
	}
	insecure := o.Insecure
	registry := o.Registry
	// As the real Kyma CLI: http:// means plain HTTP, https:// means TLS whatever --insecure says.
	switch lower := strings.ToLower(registry); {
	case strings.HasPrefix(lower, "http://"):
		registry, insecure = registry[len("http://"):], true
	case strings.HasPrefix(lower, "https://"):
		registry, insecure = registry[len("https://"):], false
	case strings.Contains(registry, "://"):
		return nil, fmt.Errorf("registry %q: only http:// and https:// are supported", o.Registry)
	}
	host, prefix, _ := strings.Cut(strings.TrimSuffix(registry, "/"), "/")
	if host == "" {
		return nil, fmt.Errorf("registry %q: no host", o.Registry)
	}
	mapping := o.NameMapping
	if mapping == "" {
		mapping = NameMappingURLPath
	}
	if mapping != NameMappingURLPath && mapping != NameMappingSHA256 {
		return nil, fmt.Errorf("name mapping %q: want %s or %s", mapping, NameMappingURLPath, NameMappingSHA256)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read CA file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no PEM certificate", o.CAFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	client := &auth.Client{
		// 5xx, 429 and 408 are retried a bounded number of times (oras' default policy):
		// distribution answers 500 now and then while the same blob is pushed concurrently.
		Client: &http.Client{Transport: retry.NewTransport(transport), Timeout: timeout},
		// In memory only: processes never share a token cache.
		Cache:  auth.NewCache(),
		Header: http.Header{"User-Agent": {"kyma-cli"}},
	}
	if o.Username != "" || o.Password != "" {
		client.Credential = auth.StaticCredential(host, auth.Credential{Username: o.Username, Password: o.Password})
	} else {
		store, err := credentials.NewStoreFromDocker(credentials.StoreOptions{})
		if err != nil {
			return nil, fmt.Errorf("docker credentials: %w", err)
		}
		client.Credential = credentials.Credential(store)
	}
	max := o.MaxResourceSize
	if max <= 0 {
		max = DefaultMaxResourceSize
	}
	return &Registry{host: host, prefix: prefix, plainHTTP: insecure, mapping: mapping, max: max, client: client, log: log}, nil
}

// BaseURL is the registry with its prefix: the descriptor's repository context. A plain-HTTP
// registry is written with http://, as the real Kyma CLI does, so lifecycle-manager reads it
// over HTTP too.
func (r *Registry) BaseURL() string {
	base := r.host
	if r.prefix != "" {
		base += "/" + r.prefix
	}
	if r.plainHTTP {
		return "http://" + base
	}
	return base
}

// RepositoryContext is this registry as a descriptor's repository context.
func (r *Registry) RepositoryContext() RepositoryContext {
	return RepositoryContext{Type: RepositoryTypeOCI, BaseURL: r.BaseURL(), ComponentNameMapping: r.mapping}
}

// NameMapping is the registry's component name mapping.
func (r *Registry) NameMapping() string { return r.mapping }

// RepositoryName is the repository of a component's versions: as OCM maps names,
// <prefix>/component-descriptors/<name> (urlPath) or <prefix>/<sha256 of the name>
// (sha256-digest, for registries that allow two path elements).
func (r *Registry) RepositoryName(component string) string {
	repo := DescriptorsRepository + "/" + component
	if r.mapping == NameMappingSHA256 {
		sum := sha256.Sum256([]byte(component))
		repo = hex.EncodeToString(sum[:])
	}
	if r.prefix != "" {
		repo = r.prefix + "/" + repo
	}
	return repo
}

func (r *Registry) repository(name string) (*remote.Repository, error) {
	repo, err := remote.NewRepository(r.host + "/" + name)
	if err != nil {
		return nil, fmt.Errorf("repository %s: %w", name, err)
	}
	repo.Client = r.client
	repo.PlainHTTP = r.plainHTTP
	return repo, nil
}

// Ref is where a component version lives in this registry (its tag as OCM maps versions).
func (r *Registry) Ref(component, version string) string {
	return r.host + "/" + r.RepositoryName(component) + ":" + VersionTag(version)
}

// PushResult says what a push did.
type PushResult struct {
	Ref    string
	Digest digest.Digest
	Size   int64
	// Unchanged: the version already had exactly this content; nothing was written.
	Unchanged bool
}

// Push publishes a component version. Pushing the same content again is a no-op; other content
// under an existing version fails with ErrExists unless overwrite is set.
//
// The descriptor gets this registry as its effective repository context (appended when another
// one was effective, as an OCM transfer does); the signature does not cover repository contexts.
func (r *Registry) Push(ctx context.Context, a *Artifact, overwrite bool) (*PushResult, error) {
	a.Descriptor.AddRepositoryContext(r.RepositoryContext())
	p, err := a.Pack()
	if err != nil {
		return nil, err
	}
	comp, version := a.Descriptor.Component.Name, a.Descriptor.Component.Version
	repo, err := r.repository(r.RepositoryName(comp))
	if err != nil {
		return nil, err
	}
	res := &PushResult{Ref: r.Ref(comp, version), Digest: p.Manifest.Digest, Size: p.Size()}
	tag := VersionTag(version)
	existing, err := repo.Resolve(ctx, tag)
	switch {
	case err == nil && existing.Digest == p.Manifest.Digest:
		res.Unchanged = true
		return res, nil
	case err == nil && !overwrite:
		return nil, fmt.Errorf("push %s: %w (registry has %s, this is %s; use --overwrite to replace it)", res.Ref, ErrExists, existing.Digest, p.Manifest.Digest)
	case err != nil && !errors.Is(err, errdef.ErrNotFound):
		return nil, fmt.Errorf("push %s: look up version: %w", res.Ref, err)
	}
	if err := r.pushContent(ctx, repo, p, tag); err != nil {
		return nil, fmt.Errorf("push %s: %w", res.Ref, err)
	}
	// Tags have no compare-and-set: check that a concurrent push did not win the tag.
	now, err := repo.Resolve(ctx, tag)
	if err != nil {
		return nil, fmt.Errorf("push %s: check tag: %w", res.Ref, err)
	}
	if now.Digest != p.Manifest.Digest && !overwrite {
		return nil, fmt.Errorf("push %s: %w (a concurrent push tagged %s)", res.Ref, ErrExists, now.Digest)
	}
	r.log.WithFields(logrus.Fields{"ref": res.Ref, "digest": p.Manifest.Digest, "bytes": res.Size}).Debug("pushed component version")
	return res, nil
}

// pushContent pushes the blobs the registry lacks, then the manifest with its version tag. While
// other processes push the same blobs, distribution may briefly not know a blob it has just
// reported (BLOB_UNKNOWN, MANIFEST_BLOB_UNKNOWN, DIGEST_INVALID): a bounded number of rounds
// pushes again.
func (r *Registry) pushContent(ctx context.Context, repo *remote.Repository, p *Packed, tag string) error {
	const rounds = 5
	var err error
	for round := 1; round <= rounds; round++ {
		if err = pushOnce(ctx, repo, p, tag); err == nil || !transientPushError(err) {
			return err
		}
		r.log.WithError(err).WithField("round", round).Debug("registry lost a concurrently pushed blob; pushing again")
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (after %v)", ctx.Err(), err)
		case <-time.After(time.Duration(round) * 200 * time.Millisecond):
		}
	}
	return fmt.Errorf("after %d rounds: %w", rounds, err)
}

func pushOnce(ctx context.Context, repo *remote.Repository, p *Packed, tag string) error {
	for _, desc := range append([]ocispec.Descriptor{p.Config}, p.Layers...) {
		ok, err := repo.Exists(ctx, desc)
		if err != nil {
			return fmt.Errorf("check blob %s: %w", desc.Digest, err)
		}
		if ok {
			continue
		}
		if err := repo.Push(ctx, desc, bytes.NewReader(p.Contents[desc.Digest])); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
			return fmt.Errorf("blob %s: %w", desc.Digest, err)
		}
	}
	if err := repo.PushReference(ctx, p.Manifest, bytes.NewReader(p.ManifestJSON), tag); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	return nil
}

func transientPushError(err error) bool {
	var resp *errcode.ErrorResponse
	if !errors.As(err, &resp) {
		return false
	}
	for _, e := range resp.Errors {
		switch e.Code {
		case errcode.ErrorCodeBlobUnknown, errcode.ErrorCodeManifestBlobUnknown, errcode.ErrorCodeDigestInvalid, errcode.ErrorCodeBlobUploadUnknown:
			return true
		}
	}
	return false
}

// Pull copies a component version, exactly as stored (every blob verified by digest), into the
// OCI layout archive at dir. Everything is fetched and checked before the archive is touched, so
// a failed pull leaves no partial version behind (and no directory it created); the error names
// the resource whose layer failed.
func (r *Registry) Pull(ctx context.Context, component, version, dir string) (*Artifact, error) {
	ref := r.Ref(component, version)
	repo, err := r.repository(r.RepositoryName(component))
	if err != nil {
		return nil, err
	}
	a, err := load(ctx, repo, VersionTag(version), r.max, true)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	if a.Descriptor.Component.Name != component || a.Descriptor.Component.Version != version {
		return nil, fmt.Errorf("pull %s: it holds %s:%s", ref, a.Descriptor.Component.Name, a.Descriptor.Component.Version)
	}
	_, statErr := os.Stat(dir)
	created := errors.Is(statErr, os.ErrNotExist)
	if err := writeStored(ctx, dir, a.stored, ArchiveRef(component, version)); err != nil {
		if created {
			_ = os.RemoveAll(dir)
		}
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	return a, nil
}

// writeStored writes loaded content, as it was, into the archive at dir and tags it.
func writeStored(ctx context.Context, dir string, st *stored, tag string) error {
	store, err := openArchive(ctx, dir)
	if err != nil {
		return err
	}
	for _, desc := range st.blobs {
		if err := store.Push(ctx, desc, bytes.NewReader(st.content[desc.Digest])); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
			return fmt.Errorf("archive %s: blob %s: %w", dir, desc.Digest, err)
		}
	}
	if err := store.Push(ctx, st.manifest, bytes.NewReader(st.content[st.manifest.Digest])); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
		return fmt.Errorf("archive %s: manifest: %w", dir, err)
	}
	if err := store.Tag(ctx, st.manifest, tag); err != nil {
		return fmt.Errorf("archive %s: tag: %w", dir, err)
	}
	return nil
}

// Get loads a component version straight from the registry.
func (r *Registry) Get(ctx context.Context, component, version string) (*Artifact, error) {
	repo, err := r.repository(r.RepositoryName(component))
	if err != nil {
		return nil, err
	}
	a, err := load(ctx, repo, VersionTag(version), r.max, false)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", r.Ref(component, version), err)
	}
	return a, nil
}

// ResolveImage gives an image reference's manifest digest (through this registry's client, so
// its credentials and CA apply; plain HTTP only for this registry's host when insecure).
func (r *Registry) ResolveImage(ctx context.Context, ref string) (digest.Digest, error) {
	parsed, err := registry.ParseReference(ref)
	if err != nil {
		return "", err
	}
	repo, err := remote.NewRepository(parsed.Registry + "/" + parsed.Repository)
	if err != nil {
		return "", err
	}
	repo.Client = r.client
	repo.PlainHTTP = r.plainHTTP && parsed.Registry == r.host
	desc, err := repo.Resolve(ctx, parsed.ReferenceOrDefault())
	if err != nil {
		return "", err
	}
	if d, err := parsed.Digest(); err == nil && d != desc.Digest {
		return "", fmt.Errorf("image %s resolves to %s", ref, desc.Digest)
	}
	return desc.Digest, nil
}

// imageByDigest pins an image reference to a digest (dropping any tag).
func imageByDigest(ref string, d digest.Digest) string {
	parsed, err := registry.ParseReference(ref)
	if err != nil {
		return ref
	}
	return parsed.Registry + "/" + parsed.Repository + "@" + d.String()
}

// RegistryModule is a component version found in a registry.
type RegistryModule struct {
	Component string `json:"component"`
	Module    string `json:"module"`
	Version   string `json:"version"`
	Channel   string `json:"channel,omitempty"`
	Ref       string `json:"ref"`
}

// ForeignComponent is something in the registry's component repositories that is not a Kyma
// module: another OCM component, or an artifact that is no component version at all.
type ForeignComponent struct {
	Ref    string `json:"ref"`
	Reason string `json:"reason"`
}

var sha256Name = regexp.MustCompile(`^[0-9a-f]{64}$`)

// List gives the Kyma modules in the registry (catalog API), sorted. Component versions that
// are not Kyma modules, and artifacts that are no component versions, are skipped with a
// warning: one foreign component never hides the others. With the sha256-digest mapping
// component names are read from the descriptors.
func (r *Registry) List(ctx context.Context) ([]RegistryModule, error) {
	mods, foreign, err := r.ListAll(ctx)
	for _, f := range foreign {
		r.log.WithFields(logrus.Fields{"ref": f.Ref, "reason": f.Reason}).Warn("skipping: not a Kyma module")
	}
	return mods, err
}

// ListAll gives the Kyma modules and, separately, what else the component repositories hold.
func (r *Registry) ListAll(ctx context.Context) ([]RegistryModule, []ForeignComponent, error) {
	reg, err := remote.NewRegistry(r.host)
	if err != nil {
		return nil, nil, err
	}
	reg.Client = r.client
	reg.PlainHTTP = r.plainHTTP
	base := DescriptorsRepository + "/"
	if r.mapping == NameMappingSHA256 {
		base = ""
	}
	if r.prefix != "" {
		base = r.prefix + "/" + base
	}
	var repos []string
	if err := reg.Repositories(ctx, "", func(page []string) error {
		for _, name := range page {
			rest, ok := strings.CutPrefix(name, base)
			if !ok || (r.mapping == NameMappingSHA256 && !sha256Name.MatchString(rest)) {
				continue
			}
			repos = append(repos, name)
		}
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("list repositories of %s: %w", r.host, err)
	}
	var out []RegistryModule
	var foreign []ForeignComponent
	for _, name := range repos {
		repo, err := r.repository(name)
		if err != nil {
			return nil, nil, err
		}
		var tags []string
		if err := repo.Tags(ctx, "", func(page []string) error { tags = append(tags, page...); return nil }); err != nil {
			return nil, nil, fmt.Errorf("list versions in %s: %w", name, err)
		}
		for _, tag := range tags {
			ref := r.host + "/" + name + ":" + tag
			// The descriptor is enough; the module's layers are not fetched.
			_, _, _, cd, err := loadDescriptor(ctx, repo, tag, &stored{content: map[digest.Digest][]byte{}})
			if err != nil {
				if ctx.Err() != nil {
					return nil, nil, fmt.Errorf("read %s: %w", ref, err)
				}
				foreign = append(foreign, ForeignComponent{Ref: ref, Reason: err.Error()})
				continue
			}
			c := cd.Component
			if cd.Resource(ResourceRawManifest) == nil {
				foreign = append(foreign, ForeignComponent{Ref: ref, Reason: fmt.Sprintf("component %s:%s has no %s resource", c.Name, c.Version, ResourceRawManifest)})
				continue
			}
			out = append(out, RegistryModule{
				Component: c.Name, Module: ModuleName(c.Name), Version: c.Version,
				Channel: cd.labelString(LabelChannel), Ref: ref,
			})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Component != out[j].Component {
			return out[i].Component < out[j].Component
		}
		return out[i].Version < out[j].Version
	})
	return out, foreign, nil
}
