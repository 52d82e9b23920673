package module

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/module/moduletest"
	"github.com/opencontainers/go-digest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The same inputs give byte-identical artifacts, whatever the directory, file order, file
// times, modes and umask.
func TestCreateIsReproducible(t *testing.T) {
	files := moduletest.SampleFiles("sample", "1.2.3")
	order := moduletest.Paths(files)
	sort.Strings(order)
	reversed := append([]string(nil), order...)
	sort.Sort(sort.Reverse(sort.StringSlice(reversed)))

	dirA, dirB := t.TempDir(), filepath.Join(t.TempDir(), "elsewhere", "deeper")
	moduletest.WriteFiles(t, dirA, files, order, 0o644)
	old := syscall.Umask(0o077)
	moduletest.WriteFiles(t, dirB, files, reversed, 0o600)
	syscall.Umask(old)
	// Different file times in the second copy.
	past := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	for _, name := range order {
		require.NoError(t, os.Chtimes(filepath.Join(dirB, name), past, past))
	}

	pack := func(dir string) *Packed {
		cfg, err := LoadConfig(filepath.Join(dir, "module-config.yaml"))
		require.NoError(t, err)
		a, err := Create(context.Background(), CreateOptions{Config: cfg, Dir: dir, Registry: "registry.example/modules"})
		require.NoError(t, err)
		p, err := a.Pack()
		require.NoError(t, err)
		return p
	}
	a, b := pack(dirA), pack(dirB)
	assert.Equal(t, a.Manifest.Digest, b.Manifest.Digest)
	assert.Equal(t, a.ManifestJSON, b.ManifestJSON)
	require.Equal(t, len(a.Contents), len(b.Contents))
	for d, data := range a.Contents {
		assert.Equal(t, data, b.Contents[d], "blob %s", d)
	}

	// One changed byte anywhere changes the digest.
	require.NoError(t, os.WriteFile(filepath.Join(dirB, "charts/values.yaml"), []byte("replicas: 2\n"), 0o600))
	assert.NotEqual(t, a.Manifest.Digest, pack(dirB).Manifest.Digest)
}

func TestCreateLayout(t *testing.T) {
	a := createSample(t, "sample", "1.0.0", "registry.example")
	p, err := a.Pack()
	require.NoError(t, err)
	require.Len(t, p.Layers, 5) // descriptor, manifest, default CR, security, charts
	assert.Equal(t, MediaTypeDescriptorLayer, p.Layers[0].MediaType)
	assert.Equal(t, MediaTypeComponentConfig, p.Config.MediaType)
	cd, err := untarFile(p.Contents[p.Layers[0].Digest], DescriptorFileName)
	require.NoError(t, err)
	parsed, err := ParseDescriptor(cd)
	require.NoError(t, err)
	assert.Equal(t, "kyma-project.io/module/sample", parsed.Component.Name)
	assert.Equal(t, []RepositoryContext{{Type: RepositoryTypeOCI, BaseURL: "registry.example", ComponentNameMapping: NameMappingURLPath}}, parsed.Component.RepositoryContexts)
	names := []string{}
	for _, r := range parsed.Component.Resources {
		names = append(names, r.Name)
		require.NotNil(t, r.Digest)
		assert.Equal(t, r.Access.LocalReference, digest.NewDigestFromEncoded(digest.SHA256, r.Digest.Value).String())
	}
	assert.Equal(t, []string{ResourceRawManifest, ResourceDefaultCR, ResourceSecurity, "charts"}, names)

	// The charts directory is a tar.gz with sorted entries and fixed headers.
	charts := a.Blobs[digest.Digest(parsed.Resource("charts").Access.LocalReference)]
	assert.Equal(t, MediaTypeTarGzip, charts.MediaType)
	assert.Equal(t, []byte{0x1f, 0x8b}, charts.Data[:2])
	assert.Equal(t, []byte{0, 0, 0, 0}, charts.Data[4:8], "gzip header time must be zero")
}

func TestConfigValidation(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, yaml, want string }{
		{"bad name", "name: sample\nversion: 1.0.0\nmanifest: m.yaml\n", `component name "sample"`},
		{"long name", "name: kyma-project.io/" + strings.Repeat("a", 250) + "\nversion: 1.0.0\nmanifest: m.yaml\n", "at most 255"},
		{"upper-case name", "name: kyma-project.io/module/Sample\nversion: 1.0.0\nmanifest: m.yaml\n", "component name"},
		{"version 1.0 kept as written", "name: kyma-project.io/module/s\nversion: 1.0\nmanifest: m.yaml\n", `version "1.0" is not a semantic version`},
		{"bad namespace", "name: kyma-project.io/module/s\nversion: 1.0.0\nmanifest: m\nnamespace: Kyma_System\n", `namespace "Kyma_System"`},
		{"bad label key", "name: kyma-project.io/module/s\nversion: 1.0.0\nmanifest: m\nlabels:\n  bad key: x\n", `label key "bad key"`},
		{"bad label value", "name: kyma-project.io/module/s\nversion: 1.0.0\nmanifest: m\nlabels:\n  k: " + strings.Repeat("v", 64) + "\n", `label "k" value`},
		{"bad channel", "name: kyma-project.io/module/s\nversion: 1.0.0\nmanifest: m\nchannel: ab\n", `channel "ab"`},
		{"state check without Error", "name: kyma-project.io/module/s\nversion: 1.0.0\nmanifest: m\ncustomStateCheck:\n- jsonPath: status.health\n  value: green\n  mappedState: Ready\n", "both Ready and Error"},
		{"bad version", "name: kyma-project.io/module/s\nversion: one\nmanifest: m.yaml\n", "not a semantic version"},
		{"no manifest", "name: kyma-project.io/module/s\nversion: 1.0.0\n", "manifest is required"},
		{"unknown field", "name: kyma-project.io/module/s\nversion: 1.0.0\nmanifest: m\nfoo: 1\n", "unknown field"},
		{"reserved resource", "name: kyma-project.io/module/s\nversion: 1.0.0\nmanifest: m\nresources:\n- name: raw-manifest\n  path: x\n", "reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "c.yaml")
			require.NoError(t, os.WriteFile(p, []byte(tc.yaml), 0o644))
			_, err := LoadConfig(p)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestSignVerify(t *testing.T) {
	a := createSample(t, "signed", "1.0.0", "registry.example")
	key, other := newKey(t), newKey(t)

	err := a.Verify("", &key.PublicKey)
	assert.True(t, errors.Is(err, ErrNoSignature), "%v", err)

	require.NoError(t, a.Sign("", key))
	require.NoError(t, a.Verify("", &key.PublicKey))
	require.NoError(t, a.Verify(DefaultSignatureName, &key.PublicKey))
	assert.True(t, errors.Is(a.Verify("someone-else", &key.PublicKey), ErrNoSignature))

	err = a.Verify("", &other.PublicKey)
	assert.True(t, errors.Is(err, ErrBadSignature), "%v", err)
	assert.Contains(t, err.Error(), KeyFingerprint(&other.PublicKey))

	// Repository contexts may change (transfer) without breaking the signature...
	a.Descriptor.Component.RepositoryContexts = append(a.Descriptor.Component.RepositoryContexts, RepositoryContext{Type: RepositoryTypeOCI, BaseURL: "mirror.example"})
	require.NoError(t, a.Verify("", &key.PublicKey))
	// ...but a signed label may not.
	a.Descriptor.Component.Labels[0].Value = "experimental"
	assert.True(t, errors.Is(a.Verify("", &key.PublicKey), ErrDigestMismatch))
	a.Descriptor.Component.Labels[0].Value = "fast"
	require.NoError(t, a.Verify("", &key.PublicKey))

	// One flipped byte in a layer: the error names the resource and the layer.
	r := a.Descriptor.Resource("charts")
	d := digest.Digest(r.Access.LocalReference)
	b := a.Blobs[d]
	flipped := append([]byte(nil), b.Data...)
	flipped[len(flipped)/2] ^= 0x01
	a.Blobs[d] = Blob{MediaType: b.MediaType, Data: flipped}
	err = a.Verify("", &key.PublicKey)
	assert.True(t, errors.Is(err, ErrContentTampering), "%v", err)
	assert.Contains(t, err.Error(), "resource charts: layer "+d.String())
}
