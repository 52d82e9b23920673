package provisioner_test

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

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client/contracttest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/config"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
)

// noop is a broker process, so that the broker's engine has types of its own.
type noop struct{}

func (noop) Name() string { return "Noop" }
func (noop) Run(_ context.Context, op engine.Operation[struct{}], _ logrus.FieldLogger) (engine.Operation[struct{}], time.Duration, error) {
	return op, 0, nil
}

func brokerEngine(t *testing.T, store storage.Store, owner string) *engine.Engine {
	e, err := engine.New(store, engine.Config{Owner: owner}, quiet())
	require.NoError(t, err)
	def, err := engine.Staged("broker_noop", time.Hour, engine.Stage[struct{}]{Name: "only", Steps: []engine.StepDef[struct{}]{{Step: noop{}}}})
	require.NoError(t, err)
	require.NoError(t, e.Register(def))
	return e
}

func quiet() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

func openStore(t *testing.T) storage.Store {
	s, err := driver.Open(context.Background(), driver.Config{Driver: driver.SQLite, Path: filepath.Join(t.TempDir(), "keb.db"), SecretKey: strings.Repeat("k", 32)}, quiet())
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newProvisioner(t *testing.T, store storage.Store, enqueue bool) *provisioner.Provisioner {
	cfg, err := config.Load()
	require.NoError(t, err)
	cfg.EnqueueInProgressOperations = enqueue
	p, err := provisioner.New(context.Background(), store, provisioner.Options{Config: cfg, Environ: []string{}, Log: quiet()})
	require.NoError(t, err)
	return p
}

// provision starts a provisioning and returns its operation as stored.
func provision(t *testing.T, store storage.Store, p *provisioner.Provisioner, name string) storage.Operation {
	in := contracttest.ProvisionInput(name)
	in.KymaConfig = nil
	st, err := p.Service.ProvisionRuntime(context.Background(), "tenant", in)
	require.NoError(t, err)
	op, err := store.Operations().GetOperation(context.Background(), *st.ID)
	require.NoError(t, err)
	return op
}

// TestEnqueueInProgressOperations: seed 000's APP_ENQUEUE_IN_PROGRESS_OPERATIONS=false: a
// provisioner process (cmd/provisioner, or embedded in the broker) does not pick up the
// operations found in progress at its start-up; it runs new ones. true (the default) picks
// them up. The broker's own engine is unaffected.
func TestEnqueueInProgressOperations(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	before := provision(t, store, newProvisioner(t, store, true), "before-restart")
	start := before.CreatedAt.Add(time.Microsecond) // the restart, after that operation

	// Embedded with false: an engine of its own, leaving the earlier operation alone.
	p := newProvisioner(t, store, false)
	shared := brokerEngine(t, store, "broker")
	own, err := p.Embed(shared, store, engine.Config{}, start, quiet())
	require.NoError(t, err)
	require.NotNil(t, own)
	assert.Equal(t, "broker/provisioner", own.Owner())
	n, err := own.RunDue(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "the operation in progress at start-up is not picked up")
	n, err = shared.RunDue(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "nor by the broker's engine, which does not run the provisioner's processes then")
	after := provision(t, store, p, "after-restart")
	n, err = own.RunDue(ctx)
	require.NoError(t, err)
	assert.Positive(t, n, "a new operation is run")
	got, err := store.Operations().GetOperation(ctx, before.ID)
	require.NoError(t, err)
	assert.Equal(t, before.Version, got.Version, "the earlier operation was not touched")
	got, err = store.Operations().GetOperation(ctx, after.ID)
	require.NoError(t, err)
	assert.Greater(t, got.Version, after.Version)

	// cmd/provisioner: the same through its engine's configuration.
	assert.Equal(t, start, p.EngineConfig(engine.Config{}, start).OnlyCreatedAfter)

	// true: the broker's engine runs the provisioner's processes, the earlier operation too.
	p = newProvisioner(t, store, true)
	assert.True(t, p.EngineConfig(engine.Config{}, start).OnlyCreatedAfter.IsZero())
	shared = brokerEngine(t, store, "broker-2")
	own, err = p.Embed(shared, store, engine.Config{}, start, quiet())
	require.NoError(t, err)
	assert.Nil(t, own)
	n, err = shared.RunDue(ctx)
	require.NoError(t, err)
	assert.Positive(t, n)
	got, err = store.Operations().GetOperation(ctx, before.ID)
	require.NoError(t, err)
	assert.Greater(t, got.Version, before.Version, "picked up")
}
