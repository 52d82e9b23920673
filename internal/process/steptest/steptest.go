// Package steptest is the shared setup of the step tests of the broker's processes
// (internal/process/provisioning, deprovisioning, update and upgrade): a discarding logger, a real
// SQLite store holding the test instance, running a step or a process on the engine as it would,
// and reading back what they stored. What differs between the processes (their Deps, fake
// provisioner answers and operations) stays in each package's tests.
package steptest

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/storagetest"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
)

// Log is a logger that discards what it is given.
func Log() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// IDs name a test instance, its runtime ("" for none) and its accounts.
type IDs struct {
	Instance, Runtime, GlobalAccount, SubAccount string
}

// must is v, once the test required err to be nil: must(f())(t).
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		require.NoError(t, err)
		return v
	}
}

// SeedInstance stores the test instance with ids: an Azure instance named c1 in westeurope.
func SeedInstance(t testing.TB, store storage.Store, ids IDs) storage.Instance {
	t.Helper()
	return must(store.Instances().InsertInstance(context.Background(), storage.Instance{
		InstanceID: ids.Instance, RuntimeID: ids.Runtime, GlobalAccountID: ids.GlobalAccount, SubAccountID: ids.SubAccount,
		ServiceID: "svc", PlanID: "plan-azure", ProviderRegion: "westeurope", Parameters: []byte(`{"name":"c1"}`),
	}))(t)
}

// OpenStore opens a real SQLite store (storagetest.OpenSQLite) holding the test instance with ids.
func OpenStore(t testing.TB, ids IDs) storage.Store {
	t.Helper()
	store := storagetest.OpenSQLite(t)
	SeedInstance(t, store, ids)
	return store
}

// GetInstance reads a stored instance.
func GetInstance(t testing.TB, store storage.Store, instanceID string) storage.Instance {
	t.Helper()
	return must(store.Instances().GetInstance(context.Background(), instanceID))(t)
}

// FailingInstances fails UpdateInstance and SetInstanceFields the first Fails times (a database
// error).
type FailingInstances struct {
	storage.Instances
	Fails int
	mu    sync.Mutex
}

func (f *FailingInstances) UpdateInstance(ctx context.Context, inst storage.Instance) (storage.Instance, error) {
	if err := f.fail(); err != nil {
		return storage.Instance{}, err
	}
	return f.Instances.UpdateInstance(ctx, inst)
}

func (f *FailingInstances) SetInstanceFields(ctx context.Context, id string, fields storage.InstanceFields) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Instances.SetInstanceFields(ctx, id, fields)
}

func (f *FailingInstances) fail() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Fails > 0 {
		f.Fails--
		return errors.New("database is down")
	}
	return nil
}

// StatusReturning is a fake provisioner's RuntimeOperationStatus (clienttest.Fake) that answers
// st and err.
func StatusReturning(st *gqlschema.OperationStatus, err error) func(tenant, opID string) (*gqlschema.OperationStatus, error) {
	return func(string, string) (*gqlschema.OperationStatus, error) { return st, err }
}

// Run runs s on op as the engine does at now: the step's first attempt is recorded before its
// first run, and every run counts as an attempt.
func Run[T any](ctx context.Context, s engine.Step[T], op engine.Operation[T], now time.Time) (engine.Operation[T], time.Duration, error) {
	sp := op.Progress.Steps[s.Name()]
	if sp.FirstAttempt.IsZero() {
		sp.FirstAttempt = now
	}
	op = Attempted(op, s.Name(), sp.FirstAttempt, sp.Attempts+1)
	return s.Run(ctx, op.ForStep(s.Name(), now), Log())
}

// RunWithin is Run bounded by timeout, as the engine bounds a run by its RunTimeout.
func RunWithin[T any](timeout time.Duration, s engine.Step[T], op engine.Operation[T], now time.Time) (engine.Operation[T], time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return Run(ctx, s, op, now)
}

// Attempted records that step first ran at first and has run attempts times, as the engine
// would have.
func Attempted[T any](op engine.Operation[T], step string, first time.Time, attempts int) engine.Operation[T] {
	steps := map[string]storage.StepProgress{}
	for k, v := range op.Progress.Steps {
		steps[k] = v
	}
	sp := steps[step]
	sp.FirstAttempt, sp.Attempts = first, attempts
	steps[step] = sp
	op.Progress.Steps = steps
	return op
}

// Clock is a test clock the engine runs on and the test moves (systemstest.Clock).
type Clock interface {
	engine.Clock
	Advance(time.Duration)
}

// Engine is an engine with one worker on store and clock, running defs.
func Engine(t testing.TB, store storage.Store, clock engine.Clock, defs ...engine.Definition) *engine.Engine {
	t.Helper()
	eng := must(engine.New(store, engine.Config{Workers: 1, LeaseDuration: time.Minute, PollInterval: 10 * time.Millisecond}, Log(), engine.WithClock(clock)))(t)
	for _, d := range defs {
		require.NoError(t, eng.Register(d))
	}
	return eng
}

// StartOperation stores a new operation of opType for instanceID with data, created at now, for
// the engine to run.
func StartOperation(t testing.TB, store storage.Store, opType, instanceID string, data any, now time.Time) storage.Operation {
	t.Helper()
	raw := must(engine.NewOperation(opType, instanceID, data, time.Hour, now))(t)
	return must(store.Operations().InsertOperation(context.Background(), raw))(t)
}

// GetOperation reads a stored operation.
func GetOperation(t testing.TB, store storage.Store, id string) storage.Operation {
	t.Helper()
	return must(store.Operations().GetOperation(context.Background(), id))(t)
}

// RunRounds runs what is due on eng, then moves clock by step, rounds times or until the
// operation id finished, and returns the operation as it is then.
func RunRounds(t testing.TB, eng *engine.Engine, store storage.Store, clock Clock, id string, rounds int, step time.Duration) storage.Operation {
	t.Helper()
	var op storage.Operation
	for i := 0; i < rounds; i++ {
		_, err := eng.RunDue(context.Background())
		require.NoError(t, err)
		op = GetOperation(t, store, id)
		if !op.State.Active() {
			break
		}
		clock.Advance(step)
	}
	return op
}

// RunToEnd is RunRounds of at most 20 rounds, the clock moved by poll, that requires the
// operation to finish.
func RunToEnd(t testing.TB, eng *engine.Engine, store storage.Store, clock Clock, id string, poll time.Duration) storage.Operation {
	t.Helper()
	op := RunRounds(t, eng, store, clock, id, 20, poll)
	if op.State.Active() {
		t.Fatalf("operation %s did not finish", id)
	}
	return op
}

// Skipped lists the steps of op the engine skipped, sorted.
func Skipped(op storage.Operation) []string {
	var out []string
	for name, sp := range op.Progress.Steps {
		if sp.Skipped {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Trace lists the operation's events as step:type.
func Trace(t testing.TB, store storage.Store, opID string) []string {
	t.Helper()
	events := must(store.Events().ListEvents(context.Background(), storage.EventFilter{OperationIDs: []string{opID}}))(t)
	var out []string
	for _, ev := range events.Items {
		out = append(out, ev.Step+":"+string(ev.Type))
	}
	return out
}
