package secretfile_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/secretfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadOrCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret")
	var n atomic.Int64
	gen := func() (string, error) { return fmt.Sprintf("value-%d", n.Add(1)), nil }

	// Concurrent first starts all get the same value.
	values := make([]string, 20)
	var wg sync.WaitGroup
	for i := range values {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, _, err := secretfile.ReadOrCreate(path, gen)
			assert.NoError(t, err)
			values[i] = v
		}()
	}
	wg.Wait()
	for _, v := range values {
		assert.Equal(t, values[0], v)
	}
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	// A restart reads it.
	v, created, err := secretfile.ReadOrCreate(path, gen)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, values[0], v)
	left, err := filepath.Glob(path + ".tmp*")
	require.NoError(t, err)
	assert.Empty(t, left, "no temporary files left")
}
