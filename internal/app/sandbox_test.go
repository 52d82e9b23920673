package app

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/director"
	"github.com/kyma-project/kyma-environment-broker/internal/externals"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durablesql"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
)

// TestEmbeddedSandboxKeepsItsStateInTheDatabase starts the embedded sandbox on the broker's SQLite
// database, registers a runtime in its Director, stops the sandbox and closes the database, then
// starts both again, as a restarted broker does: the Director still knows the runtime.
func TestEmbeddedSandboxKeepsItsStateInTheDatabase(t *testing.T) {
	t.Setenv("APP_SANDBOX_ADDRESS", "127.0.0.1:0")
	t.Setenv("APP_SANDBOX_TLS_ADDRESS", "127.0.0.1:0")
	cfg, err := externals.Load()
	require.NoError(t, err)
	log := logrus.New()
	log.SetOutput(io.Discard)
	db := driver.Config{Driver: driver.SQLite, Path: filepath.Join(t.TempDir(), "keb.db"), SecretKey: strings.Repeat("k", 32)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := func() (*director.Client, func()) {
		t.Helper()
		store, err := driver.Open(ctx, db, log)
		require.NoError(t, err)
		objects, err := durablesql.Open(ctx, store.Database(), log)
		require.NoError(t, err)
		built, stop, err := externalSystems(ctx, cfg, log, objects, nil)
		require.NoError(t, err)
		require.NotNil(t, built.Director)
		return built.Director, func() {
			stop()
			require.NoError(t, objects.Close())
			require.NoError(t, store.Close())
		}
	}

	dir, stop := start()
	id, err := dir.RegisterRuntime(ctx, "tenant", "rt-1", "c-1", "", nil)
	require.NoError(t, err)
	require.NoError(t, dir.UpdateRuntimeLabels(ctx, "tenant", id, map[string]string{director.ConsoleURLLabel: "https://console.c-1"}))
	stop()

	dir, stop = start()
	defer stop()
	again, err := dir.RegisterRuntime(ctx, "tenant", "rt-1", "c-1", "", nil)
	require.NoError(t, err)
	assert.Equal(t, id, again, "the Director found the runtime it registered before the restart")
	url, err := dir.GetConsoleURL(ctx, "tenant", "rt-1")
	require.NoError(t, err)
	assert.Equal(t, "https://console.c-1", url)
	_, err = dir.RequestOneTimeToken(ctx, "tenant", id)
	require.NoError(t, err)
}
