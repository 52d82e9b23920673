package console_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/console"
)

// vendored maps each embedded third-party asset to the npm package and the file in its
// tarball it is a copy of (web/package.json's "vendor" script copies them).
var vendored = map[string]struct{ pkg, file string }{
	"vendor/preact-htm.js": {pkg: "htm", file: "package/preact/standalone.module.js"},
}

// TestVendoredAssetsMatchTheLockfile keeps the embedded library what the lockfile pins,
// without network: the package's tarball is committed next to the lockfile (web/<name>-<version>.tgz,
// from `npm pack`), its SHA-512 must be the lockfile's integrity, and the embedded file must be
// byte for byte the one in that tarball. Upgrading is `npm install htm@X --save-exact`,
// `npm pack htm@X`, `npm run vendor` in web/.
func TestVendoredAssetsMatchTheLockfile(t *testing.T) {
	var manifest struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	readJSON(t, filepath.Join("web", "package.json"), &manifest)
	var lock struct {
		Packages map[string]struct {
			Version   string `json:"version"`
			Integrity string `json:"integrity"`
		} `json:"packages"`
	}
	readJSON(t, filepath.Join("web", "package-lock.json"), &lock)

	for asset, src := range vendored {
		locked, ok := lock.Packages["node_modules/"+src.pkg]
		require.True(t, ok, "%s is not in package-lock.json", src.pkg)
		assert.Equal(t, manifest.Dependencies[src.pkg], locked.Version, "package.json pins %s exactly to the locked version", src.pkg)

		tarball, err := os.ReadFile(filepath.Join("web", src.pkg+"-"+locked.Version+".tgz"))
		require.NoError(t, err, "the npm tarball of %s@%s is committed (npm pack)", src.pkg, locked.Version)
		sum := sha512.Sum512(tarball)
		require.Equal(t, locked.Integrity, "sha512-"+base64.StdEncoding.EncodeToString(sum[:]), "the committed tarball is the one the lockfile pins")

		want := fileInTarball(t, tarball, src.file)
		got, err := fs.ReadFile(console.Assets(), asset)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, got), "embedded %s differs from %s in %s@%s: run `npm run vendor` in internal/console/web", asset, src.file, src.pkg, locked.Version)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, v), "decoding %s", path)
}

func fileInTarball(t *testing.T, tgz []byte, name string) []byte {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(tgz))
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s is not in the tarball", name)
		}
		require.NoError(t, err)
		if h.Name == name {
			raw, err := io.ReadAll(tr)
			require.NoError(t, err)
			return raw
		}
	}
}
