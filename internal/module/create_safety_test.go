package module

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/module/moduletest"
	"github.com/opencontainers/go-digest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleConfig(t *testing.T, dir, extra string) *Config {
	t.Helper()
	files := moduletest.SampleFiles("safe", "1.0.0")
	moduletest.WriteFiles(t, dir, files, moduletest.Paths(files), 0o644)
	p := filepath.Join(dir, "module-config.yaml")
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, append(data, []byte(extra)...), 0o644))
	c, err := LoadConfig(p)
	require.NoError(t, err)
	return c
}

func tarModes(t *testing.T, data []byte) map[string]int64 {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	out := map[string]int64{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		out[h.Name] = h.Mode
	}
}

// Single files are stored as they are (not tar-wrapped) and keep their executable bit (a
// signed label); files in directories keep theirs as the tar entry's mode.
func TestCreateFilesAndExecutableBits(t *testing.T) {
	dir := t.TempDir()
	c := sampleConfig(t, dir, "- name: tool\n  path: tool.sh\n- name: notes\n  path: notes.txt\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tool.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "charts", "run.sh"), []byte("#!/bin/sh\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("notes\n"), 0o644))
	a, err := Create(context.Background(), CreateOptions{Config: c, Dir: dir})
	require.NoError(t, err)

	tool := a.Descriptor.Resource("tool")
	require.NotNil(t, tool)
	assert.Equal(t, ResourceTypeFile, tool.Type)
	assert.Equal(t, MediaTypeOctetStream, tool.Access.MediaType)
	assert.Equal(t, "#!/bin/sh\necho hi\n", string(a.Blobs[digest.Digest(tool.Access.LocalReference)].Data))
	assert.Equal(t, []Label{{Name: LabelExecutable, Value: true, Signing: true}}, tool.Labels)
	notes := a.Descriptor.Resource("notes")
	assert.Empty(t, notes.Labels)

	charts := a.Descriptor.Resource("charts")
	assert.Equal(t, MediaTypeTarGzip, charts.Access.MediaType)
	modes := tarModes(t, a.Blobs[digest.Digest(charts.Access.LocalReference)].Data)
	assert.Equal(t, int64(0o755), modes["run.sh"])
	assert.Equal(t, int64(0o644), modes["Chart.yaml"])
}

// ../ paths, absolute paths and symlinks leading out of the module directory are refused, for
// the manifest and for resources alike; symlinks to files inside are packed as those files.
func TestCreateRefusesPathsOutsideTheModule(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("secret"), 0o644))

	cases := map[string]func(dir string) string{
		"../ resource": func(dir string) string { return "- name: x\n  path: ../" + filepath.Base(outside) + "\n" },
		"absolute resource": func(dir string) string {
			return "- name: x\n  path: " + secret + "\n"
		},
		"symlink resource": func(dir string) string {
			require.NoError(t, os.Symlink(secret, filepath.Join(dir, "link")))
			return "- name: x\n  path: link\n"
		},
		"symlink inside a directory": func(dir string) string {
			require.NoError(t, os.Symlink(secret, filepath.Join(dir, "charts", "link")))
			return ""
		},
		"symlinked directory leading out": func(dir string) string {
			require.NoError(t, os.Symlink(outside, filepath.Join(dir, "charts", "out")))
			return ""
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "mod")
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "charts"), 0o755))
			// The sibling of the module dir for the ../ case.
			outsideSibling := filepath.Join(parent, filepath.Base(outside))
			require.NoError(t, os.MkdirAll(outsideSibling, 0o755))
			c := sampleConfig(t, dir, setup(dir))
			_, err := Create(context.Background(), CreateOptions{Config: c, Dir: dir})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "outside the module directory")
		})
	}

	dir := t.TempDir()
	c := sampleConfig(t, dir, "")
	c.Manifest = "../manifest.yaml"
	_, err := Create(context.Background(), CreateOptions{Config: c, Dir: dir})
	assert.ErrorContains(t, err, "outside the module directory")

	// A symlink to a file inside the module is packed as that file.
	dir = t.TempDir()
	c = sampleConfig(t, dir, "")
	require.NoError(t, os.Symlink(filepath.Join(dir, "manifest.yaml"), filepath.Join(dir, "charts", "manifest-link.yaml")))
	a, err := Create(context.Background(), CreateOptions{Config: c, Dir: dir})
	require.NoError(t, err)
	assert.Contains(t, tarModes(t, a.Blobs[digest.Digest(a.Descriptor.Resource("charts").Access.LocalReference)].Data), "manifest-link.yaml")
}

// A resource over the size limit is refused before it is read (a sparse file costs nothing),
// and a cancelled context stops the local work.
func TestCreateBoundsSizeAndTime(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "big.bin"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(2<<30))
	require.NoError(t, f.Close())
	c := sampleConfig(t, dir, "- name: big\n  path: big.bin\n")
	_, err = Create(context.Background(), CreateOptions{Config: c, Dir: dir})
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrTooLarge), "%v", err)
	assert.Contains(t, err.Error(), "resource big")

	c.Resources = nil
	_, err = Create(context.Background(), CreateOptions{Config: c, Dir: dir, MaxResourceSize: 10})
	assert.True(t, errors.Is(err, ErrTooLarge), "%v", err)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Create(ctx, CreateOptions{Config: c, Dir: dir})
	assert.True(t, errors.Is(err, context.Canceled), "%v", err)
}

// The real CLI's config fields and flags become the labels and resources it writes: internal and
// beta as template labels, resourceName and customStateCheck carried for the template, the
// security config's scan label and protecode images, and the registry credentials selector on
// every local resource.
func TestCreateRealCLIFields(t *testing.T) {
	dir := t.TempDir()
	files := moduletest.SampleFiles("fields", "1.0.0")
	files["sec-scanners-config.yaml"] = "module-name: fields\nprotecode:\n- europe-docker.pkg.dev/kyma-project/prod/fields-manager:1.2.0\n"
	moduletest.WriteFiles(t, dir, files, moduletest.Paths(files), 0o644)
	p := filepath.Join(dir, "module-config.yaml")
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	data = append(data, []byte("internal: true\nbeta: true\nresourceName: fields-fast-custom\ncustomStateCheck:\n- jsonPath: status.health\n  value: green\n  mappedState: Ready\n- jsonPath: status.health\n  value: red\n  mappedState: Error\n")...)
	require.NoError(t, os.WriteFile(p, data, 0o644))
	c, err := LoadConfig(p)
	require.NoError(t, err)
	a, err := Create(context.Background(), CreateOptions{Config: c, Dir: dir, RegistryCredSelector: "team=fields,env=prod"})
	require.NoError(t, err)
	cd := a.Descriptor

	labels := map[string]Label{}
	for _, l := range cd.Component.Labels {
		labels[l.Name] = l
	}
	assert.Equal(t, map[string]string{"team": "keb", LabelInternal: "true", LabelBeta: "true"}, labels[LabelTemplateLabels].Value)
	assert.Equal(t, "fields-fast-custom", labels[LabelTemplateName].Value)
	assert.Equal(t, []CustomStateCheck{{JSONPath: "status.health", Value: "green", MappedState: "Ready"}, {JSONPath: "status.health", Value: "red", MappedState: "Error"}}, labels[LabelCustomStateCheck].Value)
	assert.Equal(t, Label{Name: LabelSecurityScan, Value: "enabled", Version: "v1"}, labels[LabelSecurityScan])

	img := cd.Resource("fields-manager")
	require.NotNil(t, img)
	assert.Equal(t, "1.2.0", img.Version)
	assert.Equal(t, ResourceTypeImage, img.Type)
	assert.Equal(t, "external", img.Relation)
	assert.Equal(t, Access{Type: AccessTypeOCIRegistry, ImageReference: "europe-docker.pkg.dev/kyma-project/prod/fields-manager:1.2.0"}, img.Access)
	assert.Equal(t, []Label{{Name: LabelSecurityScanType, Value: "third-party-image", Version: "v1"}}, img.Labels)

	for _, r := range cd.Component.Resources {
		if r.Access.Type != AccessTypeLocalBlob {
			continue
		}
		assert.Contains(t, r.Labels, Label{Name: LabelRegistryCred, Value: map[string]string{"team": "fields", "env": "prod"}}, r.Name)
	}
	_, err = Create(context.Background(), CreateOptions{Config: c, Dir: dir, RegistryCredSelector: "a in (b"})
	assert.ErrorContains(t, err, "registry credentials selector")
}

// The default CR is checked against the CRD the manifest ships, before anything is written.
func TestCreateChecksDefaultCRAgainstCRD(t *testing.T) {
	dir := t.TempDir()
	c := sampleConfig(t, dir, "")
	crd := "\n---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: samples.operator.kyma-project.io\nspec:\n  group: operator.kyma-project.io\n  names: {kind: Sample, plural: samples}\n  scope: Namespaced\n  versions:\n  - name: v1alpha1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            properties:\n              replicas: {type: string}\n"
	m, err := os.ReadFile(filepath.Join(dir, "manifest.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), append(m, []byte(crd)...), 0o644))
	_, err = Create(context.Background(), CreateOptions{Config: c, Dir: dir})
	assert.ErrorContains(t, err, ".spec.replicas: want a string")
}

// create key refuses to replace files without force, writes the private key 0600 whatever the
// old file's mode, and refuses one path for both keys.
func TestWriteKeyPair(t *testing.T) {
	dir := t.TempDir()
	priv, pub := filepath.Join(dir, "k.pem"), filepath.Join(dir, "k.pub")
	require.NoError(t, os.WriteFile(priv, []byte("old"), 0o644))
	err := WriteKeyPair(priv, pub, 1024, false)
	assert.True(t, errors.Is(err, ErrKeyExists), "%v", err)
	old, err := os.ReadFile(priv)
	require.NoError(t, err)
	assert.Equal(t, "old", string(old))

	require.NoError(t, WriteKeyPair(priv, pub, 1024, true))
	info, err := os.Stat(priv)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	_, err = LoadPrivateKey(priv)
	require.NoError(t, err)
	_, err = LoadPublicKey(pub)
	require.NoError(t, err)

	assert.ErrorContains(t, WriteKeyPair(filepath.Join(dir, "same"), filepath.Join(dir, "same"), 1024, true), "same file")
	assert.ErrorContains(t, WriteKeyPair(filepath.Join(dir, "same"), filepath.Join(dir, ".", "x", "..", "same"), 1024, true), "same file")
	require.NoError(t, os.Symlink(priv, filepath.Join(dir, "alias")))
	assert.ErrorContains(t, WriteKeyPair(priv, filepath.Join(dir, "alias"), 1024, true), "same file")
}
