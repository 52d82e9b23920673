package storagetest

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
)

// OpenSQLite opens a real, migrated SQLite store in a file in the test's temp dir (logging
// nothing), closed when the test ends: for the tests of code that works on a storage.Store.
func OpenSQLite(t testing.TB) storage.Store {
	t.Helper()
	log := logrus.New()
	log.SetOutput(io.Discard)
	cfg := driver.Config{Driver: driver.SQLite, Path: filepath.Join(t.TempDir(), "keb.db"), SecretKey: strings.Repeat("k", 32)}
	store, err := driver.Open(context.Background(), cfg, log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	return store
}
