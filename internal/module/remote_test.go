package module

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/module/moduletest"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"oras.land/oras-go/v2/registry/remote"
)

func registryFor(t testing.TB, reg *moduletest.Registry, prefix string) *Registry {
	t.Helper()
	base := reg.Addr
	if prefix != "" {
		base += "/" + prefix
	}
	r, err := NewRegistry(RegistryOptions{
		Registry: base, Insecure: reg.CAFile == "", CAFile: reg.CAFile,
		Username: reg.Username, Password: reg.Password,
	}, testLog())
	require.NoError(t, err)
	return r
}

// Sign, push, pull into an empty directory, verify; a flipped byte in a pulled layer and another
// key fail; pushing is idempotent; other content under an existing version needs overwrite. Against
// a real registry, plain, with basic auth, with TLS and with both.
func TestPushPullVerify(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts moduletest.Options
	}{
		{"plain", moduletest.Options{}},
		{"auth", moduletest.Options{Auth: true}},
		{"tls", moduletest.Options{TLS: true}},
		{"auth+tls", moduletest.Options{Auth: true, TLS: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			srv := moduletest.Start(t, tc.opts)
			reg := registryFor(t, srv, "kyma")
			key, other := newKey(t), newKey(t)

			a := createSample(t, "pushed", "1.0.0", reg.BaseURL())
			require.NoError(t, a.Sign("", key))
			res, err := reg.Push(ctx, a, false)
			require.NoError(t, err)
			assert.False(t, res.Unchanged)
			assert.Equal(t, srv.Addr+"/kyma/component-descriptors/kyma-project.io/module/pushed:1.0.0", res.Ref)

			again, err := reg.Push(ctx, a, false)
			require.NoError(t, err)
			assert.True(t, again.Unchanged)
			assert.Equal(t, res.Digest, again.Digest)

			changed := createSample(t, "pushed", "1.0.0", reg.BaseURL())
			changed.Descriptor.Component.Provider = "someone-else"
			_, err = reg.Push(ctx, changed, false)
			require.True(t, errors.Is(err, ErrExists), "%v", err)
			assert.Contains(t, err.Error(), "already exists with other content")

			dir := filepath.Join(t.TempDir(), "pulled")
			pulled, err := reg.Pull(ctx, "kyma-project.io/module/pushed", "1.0.0", dir)
			require.NoError(t, err)
			require.NoError(t, pulled.Verify("", &key.PublicKey))
			fromArchive, err := LoadArchive(ctx, dir, "", "")
			require.NoError(t, err)
			require.NoError(t, fromArchive.Verify("", &key.PublicKey))
			assert.True(t, errors.Is(fromArchive.Verify("", &other.PublicKey), ErrBadSignature))

			// Flip one byte of a pulled layer on disk.
			r := fromArchive.Descriptor.Resource(ResourceRawManifest)
			blob := filepath.Join(dir, "blobs", "sha256", digest.Digest(r.Access.LocalReference).Encoded())
			data, err := os.ReadFile(blob)
			require.NoError(t, err)
			data[0] ^= 0x20
			require.NoError(t, os.WriteFile(blob, data, 0o644))
			tampered, err := LoadArchive(ctx, dir, "", "1.0.0")
			require.NoError(t, err)
			err = tampered.Verify("", &key.PublicKey)
			require.True(t, errors.Is(err, ErrContentTampering), "%v", err)
			assert.Contains(t, err.Error(), "resource raw-manifest: layer "+r.Access.LocalReference)

			// Overwrite replaces the version.
			res2, err := reg.Push(ctx, changed, true)
			require.NoError(t, err)
			got, err := reg.Get(ctx, "kyma-project.io/module/pushed", "1.0.0")
			require.NoError(t, err)
			assert.Equal(t, "someone-else", got.Descriptor.Component.Provider)
			assert.NotEqual(t, res.Digest, res2.Digest)

			list, err := reg.List(ctx)
			require.NoError(t, err)
			require.Len(t, list, 1)
			assert.Equal(t, RegistryModule{Component: "kyma-project.io/module/pushed", Module: "pushed", Version: "1.0.0", Channel: "fast", Ref: res.Ref}, list[0])
		})
	}
}

func TestRegistryRefusesWrongCredentials(t *testing.T) {
	srv := moduletest.Start(t, moduletest.Options{Auth: true})
	srv.Password = "wrong"
	_, err := registryFor(t, srv, "").Push(context.Background(), createSample(t, "x", "1.0.0", srv.Addr), false)
	require.Error(t, err)
	assert.Contains(t, strings.ToLower(err.Error()), "unauthorized")
}

func TestSHA256NameMapping(t *testing.T) {
	ctx := context.Background()
	srv := moduletest.Start(t, moduletest.Options{})
	reg, err := NewRegistry(RegistryOptions{Registry: srv.Addr, Insecure: true, NameMapping: NameMappingSHA256}, testLog())
	require.NoError(t, err)
	a := createSample(t, "hashed", "0.1.0", srv.Addr)
	res, err := reg.Push(ctx, a, false)
	require.NoError(t, err)
	// OCM's sha256-digest mapping: <prefix>/<sha256 of the name>, two path elements at most.
	assert.Equal(t, srv.Addr+"/5bd14002b0cfbd4d3049134fe02a2c72978ebbbf2490903cb56b53eb57b188b5:0.1.0", res.Ref)
	list, err := reg.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "kyma-project.io/module/hashed", list[0].Component)
}

// A module made from a pre-existing image references it by digest; the image's blobs are not
// uploaded again into the component's repository.
func TestCreateFromImage(t *testing.T) {
	ctx := context.Background()
	srv := moduletest.Start(t, moduletest.Options{})
	reg := registryFor(t, srv, "")

	// A small image in the same registry.
	imgRepo, err := remote.NewRepository(srv.Addr + "/operators/sample")
	require.NoError(t, err)
	imgRepo.PlainHTTP = true
	layer := []byte("operator binary")
	layerDesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Digest: digest.FromBytes(layer), Size: int64(len(layer))}
	cfg := []byte(`{"architecture":"amd64","os":"linux"}`)
	cfgDesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromBytes(cfg), Size: int64(len(cfg))}
	require.NoError(t, imgRepo.Push(ctx, layerDesc, bytes.NewReader(layer)))
	require.NoError(t, imgRepo.Push(ctx, cfgDesc, bytes.NewReader(cfg)))
	m, err := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: cfgDesc, Layers: []ocispec.Descriptor{layerDesc}})
	require.NoError(t, err)
	mDesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(m), Size: int64(len(m))}
	require.NoError(t, imgRepo.PushReference(ctx, mDesc, bytes.NewReader(m), "1.0"))

	dir := t.TempDir()
	files := moduletest.SampleFiles("imaged", "1.0.0")
	moduletest.WriteFiles(t, dir, files, moduletest.Paths(files), 0o644)
	c, err := LoadConfig(filepath.Join(dir, "module-config.yaml"))
	require.NoError(t, err)
	a, err := Create(ctx, CreateOptions{Config: c, Dir: dir, Registry: reg.BaseURL(), Image: srv.Addr + "/operators/sample:1.0", ResolveImage: reg.ResolveImage})
	require.NoError(t, err)
	img := a.Descriptor.Resource("imaged")
	require.NotNil(t, img)
	assert.Equal(t, ResourceTypeImage, img.Type)
	assert.Equal(t, srv.Addr+"/operators/sample@"+mDesc.Digest.String(), img.Access.ImageReference)
	assert.Equal(t, mDesc.Digest.Encoded(), img.Digest.Value)

	key := newKey(t)
	require.NoError(t, a.Sign("", key))
	_, err = reg.Push(ctx, a, false)
	require.NoError(t, err)

	cdRepo, err := remote.NewRepository(srv.Addr + "/" + reg.RepositoryName("kyma-project.io/module/imaged"))
	require.NoError(t, err)
	cdRepo.PlainHTTP = true
	exists, err := cdRepo.Blobs().Exists(ctx, layerDesc)
	require.NoError(t, err)
	assert.False(t, exists, "the image layer must not be copied into the component repository")

	got, err := reg.Get(ctx, "kyma-project.io/module/imaged", "1.0.0")
	require.NoError(t, err)
	require.NoError(t, got.Verify("", &key.PublicKey))
}

// A push to another registry appends that registry as the effective repository context (as an
// OCM transfer does), once; the signature still verifies. A plain-HTTP registry is written with
// http://, and --registry accepts the scheme.
func TestPushToAnotherRegistryAppendsContext(t *testing.T) {
	ctx := context.Background()
	srvA, srvB := moduletest.Start(t, moduletest.Options{}), moduletest.Start(t, moduletest.Options{})
	regA := registryFor(t, srvA, "a")
	regB, err := NewRegistry(RegistryOptions{Registry: "http://" + srvB.Addr + "/b"}, testLog())
	require.NoError(t, err)
	assert.Equal(t, "http://"+srvB.Addr+"/b", regB.BaseURL())
	assert.Equal(t, "http://"+srvA.Addr+"/a", regA.BaseURL())

	key := newKey(t)
	a := createSample(t, "moved", "1.0.0", regA.BaseURL())
	require.NoError(t, a.Sign("", key))
	_, err = regA.Push(ctx, a, false)
	require.NoError(t, err)
	archive := t.TempDir()
	_, err = SaveArchive(ctx, archive, a)
	require.NoError(t, err)

	fromArchive, err := LoadArchive(ctx, archive, "", "")
	require.NoError(t, err)
	_, err = regB.Push(ctx, fromArchive, false)
	require.NoError(t, err)
	got, err := regB.Get(ctx, "kyma-project.io/module/moved", "1.0.0")
	require.NoError(t, err)
	require.Len(t, got.Descriptor.Component.RepositoryContexts, 2)
	assert.Equal(t, regA.BaseURL(), got.Descriptor.Component.RepositoryContexts[0].BaseURL)
	assert.Equal(t, RepositoryContext{Type: RepositoryTypeOCI, BaseURL: "http://" + srvB.Addr + "/b", ComponentNameMapping: NameMappingURLPath},
		*got.Descriptor.EffectiveRepositoryContext())
	require.NoError(t, got.Verify("", &key.PublicKey))

	// Pushing again to B adds nothing.
	res, err := regB.Push(ctx, got, false)
	require.NoError(t, err)
	assert.True(t, res.Unchanged)
	assert.Len(t, got.Descriptor.Component.RepositoryContexts, 2)

	for _, bad := range []string{"ftp://" + srvB.Addr, "http://"} {
		_, err := NewRegistry(RegistryOptions{Registry: bad}, testLog())
		assert.Error(t, err, bad)
	}
	secure, err := NewRegistry(RegistryOptions{Registry: "https://" + srvB.Addr, Insecure: true}, testLog())
	require.NoError(t, err)
	assert.Equal(t, srvB.Addr, secure.BaseURL(), "https:// means TLS whatever --insecure says")
}

// A foreign OCM component (globalAccess, referenceName, git sources, fields this package does not
// know) and a non-component artifact next to a module: listing shows the module and names the
// others; the foreign descriptor is read, signed and written back without losing a field.
func TestListSurvivesForeignComponents(t *testing.T) {
	ctx := context.Background()
	srv := moduletest.Start(t, moduletest.Options{})
	reg := registryFor(t, srv, "")
	_, err := reg.Push(ctx, createSample(t, "listed", "1.0.0", reg.BaseURL()), false)
	require.NoError(t, err)

	foreignYAML := []byte(`meta:
  schemaVersion: v2
component:
  name: github.com/acme/foreign
  version: 2.0.0
  provider: acme
  creationTime: "2024-01-02T03:04:05Z"
  repositoryContexts:
  - baseUrl: ghcr.io
    componentNameMapping: urlPath
    subPath: acme/ocm
    type: OCIRegistry
  sources:
  - name: src
    type: git
    version: 2.0.0
    access:
      type: gitHub
      repoUrl: github.com/acme/foreign
      commit: 0123456789abcdef
  componentReferences: []
  resources:
  - name: image
    type: ociImage
    version: 2.0.0
    relation: external
    access:
      type: ociArtifact
      imageReference: ghcr.io/acme/image:2.0.0
      referenceName: acme/image:2.0.0
      globalAccess:
        type: ociBlob
        ref: ghcr.io/acme/x
        size: 1
    digest:
      hashAlgorithm: SHA-256
      normalisationAlgorithm: ociArtifactDigest/v1
      value: 6a1c7637a528ab5957ab60edf73b5298a0a03de02a96be0313ee89b22544840c
    someFutureField: {kept: true}
`)
	cd, err := ParseDescriptor(foreignYAML)
	require.NoError(t, err, "standard OCM fields are read, not refused")
	foreign := &Artifact{Descriptor: cd, Blobs: map[digest.Digest]Blob{}}
	_, err = reg.Push(ctx, foreign, false)
	require.NoError(t, err)

	// Not a component version at all, in the component repositories.
	junk, err := remote.NewRepository(srv.Addr + "/component-descriptors/junk")
	require.NoError(t, err)
	junk.PlainHTTP = true
	cfg := []byte(`{}`)
	cfgDesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromBytes(cfg), Size: int64(len(cfg))}
	require.NoError(t, junk.Push(ctx, cfgDesc, bytes.NewReader(cfg)))
	m, err := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: cfgDesc, Layers: []ocispec.Descriptor{}})
	require.NoError(t, err)
	mDesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(m), Size: int64(len(m))}
	require.NoError(t, junk.PushReference(ctx, mDesc, bytes.NewReader(m), "1"))

	mods, others, err := reg.ListAll(ctx)
	require.NoError(t, err)
	require.Len(t, mods, 1)
	assert.Equal(t, "listed", mods[0].Module)
	require.Len(t, others, 2)
	list, err := reg.List(ctx)
	require.NoError(t, err)
	assert.Equal(t, mods, list)

	// Read, sign, write back: every field is still there.
	got, err := reg.Get(ctx, "github.com/acme/foreign", "2.0.0")
	require.NoError(t, err)
	key := newKey(t)
	require.NoError(t, got.Sign("", key))
	_, err = reg.Push(ctx, got, true)
	require.NoError(t, err)
	again, err := reg.Get(ctx, "github.com/acme/foreign", "2.0.0")
	require.NoError(t, err)
	require.NoError(t, again.Verify("", &key.PublicKey))
	raw, err := json.Marshal(again.Descriptor)
	require.NoError(t, err)
	for _, field := range []string{`"globalAccess"`, `"referenceName":"acme/image:2.0.0"`, `"subPath":"acme/ocm"`, `"commit":"0123456789abcdef"`, `"someFutureField":{"kept":true}`, `"creationTime":"2024-01-02T03:04:05Z"`} {
		assert.Contains(t, string(raw), field)
	}
}

// Archives are keyed by component and version: two modules of one version live side by side;
// a directory that is not an OCI layout is never written into; build metadata in a version
// maps to OCM's tag and back.
func TestArchiveKeysAndTags(t *testing.T) {
	ctx := context.Background()
	archive := t.TempDir()
	one, two := createSample(t, "one", "1.0.0", ""), createSample(t, "two", "1.0.0", "")
	_, err := SaveArchive(ctx, archive, one)
	require.NoError(t, err)
	_, err = SaveArchive(ctx, archive, two)
	require.NoError(t, err)
	got, err := LoadArchive(ctx, archive, "kyma-project.io/module/two", "1.0.0")
	require.NoError(t, err)
	assert.Equal(t, "kyma-project.io/module/two", got.Descriptor.Component.Name)
	got, err = LoadArchive(ctx, archive, "kyma-project.io/module/one", "")
	require.NoError(t, err)
	assert.Equal(t, "kyma-project.io/module/one", got.Descriptor.Component.Name)
	_, err = LoadArchive(ctx, archive, "", "1.0.0")
	assert.ErrorContains(t, err, "2 matches")
	_, err = LoadArchive(ctx, archive, "kyma-project.io/module/three", "1.0.0")
	assert.ErrorContains(t, err, "holds no kyma-project.io/module/three:1.0.0")

	unrelated := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(unrelated, "index.json"), []byte(`{"mine":true}`), 0o644))
	_, err = SaveArchive(ctx, unrelated, one)
	assert.ErrorContains(t, err, "not an OCI image layout")
	data, err := os.ReadFile(filepath.Join(unrelated, "index.json"))
	require.NoError(t, err)
	assert.Equal(t, `{"mine":true}`, string(data))

	srv := moduletest.Start(t, moduletest.Options{})
	reg := registryFor(t, srv, "")
	built := createSample(t, "built", "1.0.0+build.7", reg.BaseURL())
	res, err := reg.Push(ctx, built, false)
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(res.Ref, ":1.0.0.build-build.7"), res.Ref)
	back, err := reg.Get(ctx, "kyma-project.io/module/built", "1.0.0+build.7")
	require.NoError(t, err)
	assert.Equal(t, "1.0.0+build.7", back.Descriptor.Component.Version)
	list, err := reg.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "1.0.0+build.7", list[0].Version)
	pulled := filepath.Join(t.TempDir(), "p")
	_, err = reg.Pull(ctx, "kyma-project.io/module/built", "1.0.0+build.7", pulled)
	require.NoError(t, err)
	_, err = LoadArchive(ctx, pulled, "kyma-project.io/module/built", "1.0.0+build.7")
	require.NoError(t, err)
}

// A pull that fails (a layer gone from the registry) leaves no archive behind and names the
// resource.
func TestFailedPullLeavesNothing(t *testing.T) {
	ctx := context.Background()
	srv := moduletest.Start(t, moduletest.Options{})
	reg := registryFor(t, srv, "")
	a := createSample(t, "broken", "1.0.0", reg.BaseURL())
	_, err := reg.Push(ctx, a, false)
	require.NoError(t, err)
	charts := a.Descriptor.Resource("charts")
	// Replace the stored blob with other bytes behind the registry's back.
	blobPath := filepath.Join(srv.Dir, "data", "docker", "registry", "v2", "blobs", "sha256", digest.Digest(charts.Access.LocalReference).Encoded()[:2], digest.Digest(charts.Access.LocalReference).Encoded(), "data")
	require.FileExists(t, blobPath)
	require.NoError(t, os.WriteFile(blobPath, []byte("tampered"), 0o644))

	dir := filepath.Join(t.TempDir(), "pulled")
	_, err = reg.Pull(ctx, "kyma-project.io/module/broken", "1.0.0", dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "resource charts")
	assert.NoDirExists(t, dir)

	// Into an existing archive: it keeps what it had and gets no entry.
	existing := t.TempDir()
	_, err = SaveArchive(ctx, existing, createSample(t, "other", "1.0.0", ""))
	require.NoError(t, err)
	_, err = reg.Pull(ctx, "kyma-project.io/module/broken", "1.0.0", existing)
	require.Error(t, err)
	_, err = LoadArchive(ctx, existing, "kyma-project.io/module/broken", "")
	assert.Error(t, err)
	_, err = LoadArchive(ctx, existing, "kyma-project.io/module/other", "1.0.0")
	assert.NoError(t, err)
}
