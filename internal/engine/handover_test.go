package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv"
)

// takesSignal tells when the engine has become a taker of the store's new operations.
type takesSignal struct {
	storage.Store
	registered chan struct{}
}

func (s takesSignal) Takes(ctx context.Context, t storage.Taker) {
	s.Store.Takes(ctx, t)
	close(s.registered)
}

// TestNewOperationStartsWithoutAClaim: an instance's first operation, inserted while a worker is
// free, runs from its insert: no claim.
func TestNewOperationStartsWithoutAClaim(t *testing.T) {
	x := step("x", nil)
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(x)}})
	require.NoError(t, err)
	store := takesSignal{Store: newStore(t), registered: make(chan struct{})}
	reg := prometheus.NewRegistry()
	// A poll interval far longer than the test: the operation runs from its hand-over or never.
	eng, err := New(store, Config{Workers: 2, PollInterval: time.Hour}, testLogger(), WithRegisterer(reg))
	require.NoError(t, err)
	require.NoError(t, eng.Register(p))
	testenv.Background(t, eng.Run)
	<-store.registered

	op, err := NewOperation("provision", "i1", testData{}, time.Hour, time.Now())
	require.NoError(t, err)
	_, inserted, err := store.Instances().InsertInstanceWithOperation(context.Background(), storage.Instance{InstanceID: "i1"}, op)
	require.NoError(t, err)
	assert.Equal(t, eng.Owner(), inserted.LeaseOwner)
	done := waitState(t, store, op.ID, storage.StateSucceeded, 5*time.Second)
	assert.Empty(t, done.LeaseOwner)
	assert.Equal(t, 1, x.Runs())
	assert.Equal(t, 1.0, testutil.ToFloat64(eng.metrics.handedOver.WithLabelValues("provision")))
	assert.Equal(t, 0.0, testutil.ToFloat64(eng.metrics.writes.WithLabelValues("provision", "claim")))
}

// TestHandOverKeepsAtMostAQueueBetweenClaims: new operations take free workers and wait for busy
// ones up to handOverQueue beyond them, and no more than that between two claims, so due
// operations are claimed in between; a cancelled reservation gives its worker back.
func TestHandOverKeepsAtMostAQueueBetweenClaims(t *testing.T) {
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(step("x", nil))}})
	require.NoError(t, err)
	eng, err := New(newStore(t), Config{Workers: 8}, testLogger())
	require.NoError(t, err)
	require.NoError(t, eng.Register(p))
	var delivered []storage.Operation
	freed := make(chan struct{}, 1)
	h := &handOver{e: eng, freed: freed, deliver: func(op storage.Operation, _ time.Time) { delivered = append(delivered, op) }}
	h.busy = new(atomic.Int64)

	_, ok := h.Reserve("deprovision")
	assert.False(t, ok, "a type this engine does not run")
	require.Equal(t, 2, handOverQueue(8))
	h.busy.Store(7)
	first, ok := h.Reserve("provision")
	require.True(t, ok)
	assert.Equal(t, eng.Owner(), first.Owner)
	_, ok = h.Reserve("provision")
	require.True(t, ok)
	_, ok = h.Reserve("provision")
	assert.False(t, ok, "two kept since the last claim")
	assert.Equal(t, int64(9), h.busy.Load())

	h.claimed()
	_, ok = h.Reserve("provision")
	require.True(t, ok, "a claim ran")
	_, ok = h.Reserve("provision")
	assert.False(t, ok, "every worker busy and the queue full")
	assert.Equal(t, int64(10), h.busy.Load())

	first.Cancel()
	assert.Equal(t, int64(9), h.busy.Load())
	select {
	case <-freed:
	default:
		t.Fatal("the dispatcher was not told of the worker given back")
	}
	first.Take(storage.Operation{ID: "late"})
	assert.Empty(t, delivered, "a reservation ends once")
}

// TestHandOverAfterStopReleasesTheLease: an operation inserted for a worker kept just before the
// engine stopped taking is not run here; its lease is released for another replica.
func TestHandOverAfterStopReleasesTheLease(t *testing.T) {
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(step("x", nil))}})
	require.NoError(t, err)
	store := newStore(t)
	eng, err := New(store, Config{Workers: 2}, testLogger())
	require.NoError(t, err)
	require.NoError(t, eng.Register(p))
	var delivered []storage.Operation
	h := &handOver{e: eng, busy: new(atomic.Int64), freed: make(chan struct{}, 1),
		deliver: func(op storage.Operation, _ time.Time) { delivered = append(delivered, op) }}
	store.Takes(context.Background(), h)

	op, err := NewOperation("provision", "i1", testData{}, time.Hour, time.Now())
	require.NoError(t, err)
	r, ok := h.Reserve("provision")
	require.True(t, ok)
	h.close()
	until := r.LeaseUntil
	op.LeaseOwner, op.LeaseExpiresAt, op.DueAt = r.Owner, &until, &until
	inserted, err := store.Operations().InsertOperation(context.Background(), op)
	require.NoError(t, err)
	r.Take(inserted)

	assert.Empty(t, delivered)
	assert.Equal(t, int64(0), h.busy.Load())
	got, err := store.Operations().GetOperation(context.Background(), op.ID)
	require.NoError(t, err)
	assert.Empty(t, got.LeaseOwner, "released")
	_, ok = h.Reserve("provision")
	assert.False(t, ok, "stopped")
}

// TestDispatcherClaimsWhenKeptOperationsFreeTheirWorkers: with new operations kept beyond the
// workers, the dispatcher still wakes when workers free up and claims what is due, not only at
// its next poll.
func TestDispatcherClaimsWhenKeptOperationsFreeTheirWorkers(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{}, 3)
	blocking := step("x", func(ctx context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return op, 0, nil
	})
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(blocking)}})
	require.NoError(t, err)
	taking := takesSignal{Store: newStore(t), registered: make(chan struct{})}
	store := withWakeProbe(taking)
	// One worker, and a poll interval far longer than the test.
	eng, err := New(store, Config{Workers: 1, PollInterval: time.Hour}, testLogger())
	require.NoError(t, err)
	require.NoError(t, eng.Register(p))
	testenv.Background(t, eng.Run)
	<-taking.registered

	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	running := insertNow(t, store, "provision") // claimed: the one worker runs it
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the first operation did not start")
	}
	op, err := NewOperation("provision", "i1", testData{}, time.Hour, time.Now())
	require.NoError(t, err)
	_, inserted, err := store.Instances().InsertInstanceWithOperation(context.Background(), storage.Instance{InstanceID: "i1"}, op)
	require.NoError(t, err)
	require.Equal(t, eng.Owner(), inserted.LeaseOwner, "kept, waiting beyond the worker")
	due := insertNow(t, store, "provision") // for a claim: the dispatcher is woken, finds no free worker
	store.asleep(t, 5*time.Second)          // and sleeps, the worker still busy
	close(release)
	waitState(t, store, running.ID, storage.StateSucceeded, 5*time.Second)
	waitState(t, store, inserted.ID, storage.StateSucceeded, 5*time.Second)
	waitState(t, store, due.ID, storage.StateSucceeded, 5*time.Second)
}
