// Package secretfile keeps a generated secret (a database key, generated credentials) in a file
// of its own, readable by the owner only, so that it survives restarts.
package secretfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ReadOrCreate returns the secret kept at path, or, when there is no file yet, one made by
// generate and written there; created tells which. Concurrent first starts agree on one value:
// the file is written under a temporary name and linked into place, so a start either wins the
// link or reads the winner's complete file.
func ReadOrCreate(path string, generate func() (string, error)) (value string, created bool, err error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(b)), false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", false, fmt.Errorf("reading %s: %w", path, err)
	}
	v, err := generate()
	if err != nil {
		return "", false, err
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return "", false, fmt.Errorf("creating %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	werr := f.Chmod(0o600)
	if werr == nil {
		_, werr = f.WriteString(v + "\n")
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return "", false, fmt.Errorf("writing %s: %w", path, werr)
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, os.ErrExist) {
			v, _, err := ReadOrCreate(path, generate)
			return v, false, err
		}
		return "", false, fmt.Errorf("creating %s: %w", path, err)
	}
	return v, true, nil
}
