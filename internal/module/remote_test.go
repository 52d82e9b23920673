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
			fromArchive, err := LoadArchive(ctx, dir, "")
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
			tampered, err := LoadArchive(ctx, dir, "1.0.0")
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
	assert.Regexp(t, `/component-descriptors/[0-9a-f]{64}:0\.1\.0$`, res.Ref)
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
