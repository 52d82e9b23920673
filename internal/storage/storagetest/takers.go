package storagetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// recordingTaker keeps a worker for every operation of its type and records what happens to
// each reservation.
type recordingTaker struct {
	opType string
	mu     sync.Mutex
	taken  []storage.Operation
	cancel int
}

func (r *recordingTaker) Reserve(opType string) (storage.Reservation, bool) {
	if opType != r.opType {
		return storage.Reservation{}, false
	}
	return storage.Reservation{
		Owner: "taker", LeaseUntil: now().Add(time.Minute),
		Take: func(op storage.Operation) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.taken = append(r.taken, op)
		},
		Cancel: func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.cancel++
		},
	}, true
}

func (r *recordingTaker) state() ([]storage.Operation, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]storage.Operation(nil), r.taken...), r.cancel
}

// testTakers: an instance's or a runtime's first operation, due at once, is inserted leased to
// the taker that kept a worker for it and handed over after the commit, and no engine is woken
// for it; a failed insert gives the worker back; an operation due later, or of another type, is
// inserted as before; a taker whose context ended takes nothing more.
func testTakers(t *testing.T, e *env) {
	takerCtx, stop := context.WithCancel(ctx)
	defer stop()
	taker := &recordingTaker{opType: "provision"}
	e.s.Takes(takerCtx, taker)
	wake, err := e.s.Wakeups(takerCtx)
	require.NoError(t, err)
	drain := func() {
		for {
			select {
			case <-wake:
			default:
				return
			}
		}
	}
	drain()

	n := now()
	_, op, err := e.s.Instances().InsertInstanceWithOperation(ctx, newInstance("i1"), newOp("op1", "i1", "provision", storage.StatePending, &n))
	require.NoError(t, err)
	taken, cancelled := taker.state()
	require.Len(t, taken, 1)
	assert.Zero(t, cancelled)
	assert.Equal(t, op, taken[0], "the taker gets the inserted operation")
	assert.Equal(t, "taker", op.LeaseOwner)
	require.NotNil(t, op.LeaseExpiresAt)
	require.NotNil(t, op.DueAt)
	assert.Equal(t, *op.LeaseExpiresAt, *op.DueAt, "while leased, due when the lease expires (as a claim leaves it)")
	stored, err := e.s.Operations().GetOperation(ctx, "op1")
	require.NoError(t, err)
	assert.Equal(t, "taker", stored.LeaseOwner)
	assert.Equal(t, op.Version, stored.Version)
	select {
	case <-wake:
		t.Fatal("an engine was woken for an operation a taker has")
	case <-time.After(50 * time.Millisecond):
	}
	claimed, err := e.s.Operations().ClaimOperations(ctx, storage.ClaimRequest{Owner: "other", Now: n.Add(time.Second),
		LeaseUntil: n.Add(time.Minute), Limit: 10})
	require.NoError(t, err)
	assert.Empty(t, claimed, "nobody else claims it")

	// A failed insert (the instance exists) gives the worker back.
	_, _, err = e.s.Instances().InsertInstanceWithOperation(ctx, newInstance("i1"), newOp("op2", "i1", "provision", storage.StatePending, &n))
	require.ErrorIs(t, err, storage.ErrAlreadyExists)
	taken, cancelled = taker.state()
	assert.Len(t, taken, 1)
	assert.Equal(t, 1, cancelled)

	// Due later, or of a type no taker runs: inserted for a claim, and the engines are woken.
	later := n.Add(time.Hour)
	_, op, err = e.s.Instances().InsertInstanceWithOperation(ctx, newInstance("i2"), newOp("op3", "i2", "provision", storage.StatePending, &later))
	require.NoError(t, err)
	assert.Empty(t, op.LeaseOwner)
	_, op, err = e.s.Runtimes().InsertRuntimeWithOperation(ctx, newRuntime("rt1", "t"), newOp("op4", "rt1", "provisioner_provision", storage.StatePending, &n))
	require.NoError(t, err)
	assert.Empty(t, op.LeaseOwner)
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("no engine was woken for an operation to claim")
	}
	taken, cancelled = taker.state()
	assert.Len(t, taken, 1)
	assert.Equal(t, 1, cancelled)

	// A taker whose context ended takes nothing.
	stop()
	require.Eventually(t, func() bool {
		id := "late-" + time.Now().Format("150405.000000000")
		_, op, err := e.s.Instances().InsertInstanceWithOperation(ctx, newInstance(id), newOp(id, id, "provision", storage.StatePending, &n))
		require.NoError(t, err)
		return op.LeaseOwner == ""
	}, 5*time.Second, 10*time.Millisecond)
}
