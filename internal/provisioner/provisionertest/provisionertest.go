// Package provisionertest gives tests a real embedded provisioner: SQLite storage, the
// simulated backend with short durations, and a running step engine.
package provisionertest

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/compass"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/config"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
)

// FastSimulation is a simulated backend whose operations take a few hundred milliseconds.
const FastSimulation = `{"simulated": {"type": "simulated", "spec": {"domainDelay": "50ms", "creationDuration": "300ms",
	"updateDuration": "200ms", "hibernationDuration": "200ms", "deletionDuration": "200ms"}}}`

// Env is a running provisioner for a test.
type Env struct {
	Store       storage.Store
	Provisioner *provisioner.Provisioner
}

// NewService starts a provisioner for the test and returns its service.
func NewService(t *testing.T) client.Client {
	return New(t, Options{}).Provisioner.Service
}

// Options adjust New; zero values take fast simulated defaults.
type Options struct {
	Store    storage.Store
	Backends infrastructure.Config
	Clusters runtimeclient.Factory
	Config   *config.Config
	// Director is the provisioner's Director client [a local stand-in].
	Director compass.Client
}

// New starts a provisioner and its engine; both stop when the test ends.
func New(t *testing.T, o Options) *Env {
	t.Helper()
	log := logrus.New()
	if !testing.Verbose() {
		log.SetOutput(io.Discard)
	}
	ctx := context.Background()
	if o.Store == nil {
		store, err := driver.Open(ctx, driver.Config{Driver: driver.SQLite, Path: filepath.Join(t.TempDir(), "keb.db"), SecretKey: strings.Repeat("k", 32)}, log)
		require.NoError(t, err)
		t.Cleanup(func() { store.Close() })
		o.Store = store
	}
	if o.Backends.SetJSON == "" && o.Backends.SetFile == "" {
		o.Backends.SetJSON = FastSimulation
	}
	if o.Clusters == nil {
		o.Clusters = runtimeclient.Clusters{Simulated: runtimeclient.Simulated{InstallDuration: 200 * time.Millisecond, ConnectionDuration: 100 * time.Millisecond}}
	}
	cfg, err := config.Load()
	require.NoError(t, err)
	if o.Config != nil {
		cfg = *o.Config
	}
	p, err := provisioner.New(ctx, o.Store, provisioner.Options{
		Config: cfg, Backends: o.Backends, Clusters: o.Clusters, Director: o.Director, PollInterval: 25 * time.Millisecond, Log: log,
	})
	require.NoError(t, err)
	eng, err := engine.New(o.Store, engine.Config{Workers: 16, PollInterval: 50 * time.Millisecond}, log)
	require.NoError(t, err)
	require.NoError(t, p.Register(eng))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- eng.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return &Env{Store: o.Store, Provisioner: p}
}
