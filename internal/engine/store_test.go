package engine

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/stretchr/testify/require"
)

// newStore opens a real SQLite store in the test's temp dir: the engine's unit tests run on
// the embedded driver, the durability tests on PostgreSQL.
func newStore(t *testing.T) storage.Store {
	t.Helper()
	cfg := driver.Config{Driver: driver.SQLite, Path: filepath.Join(t.TempDir(), "keb.db"), SecretKey: strings.Repeat("k", 32)}
	store, err := driver.Open(context.Background(), cfg, testLogger())
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	return store
}
