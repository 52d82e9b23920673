package storagetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// testWake: Wake makes waiting, unleased, active operations due now (by ID, by instance, by the
// instance's runtime, narrowed by type), leaves everything else alone and wakes subscribers.
func testWake(t *testing.T, e *env) {
	ops := e.s.Operations()
	n := now()
	later := n.Add(30 * time.Minute)
	_, err := e.s.Instances().InsertInstance(ctx, newInstance("inst")) // runtime rt-inst
	require.NoError(t, err)
	mustInsertOp(t, e.s, newOp("leased", "inst", "provision", storage.StatePending, ptr(n)))
	held := claimOne(t, e.s, "w", n)
	require.Equal(t, "leased", held.ID)
	mustInsertOp(t, e.s, newOp("waiting", "inst", "provision", storage.StateInProgress, ptr(later)))
	mustInsertOp(t, e.s, newOp("other-type", "inst", "update", storage.StatePending, ptr(later)))
	mustInsertOp(t, e.s, newOp("already-due", "inst", "provision", storage.StateInProgress, ptr(n.Add(-time.Minute))))
	mustInsertOp(t, e.s, newOp("done", "inst", "provision", storage.StateSucceeded, nil))
	mustInsertOp(t, e.s, newOp("elsewhere", "inst2", "provision", storage.StateInProgress, ptr(later)))

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wake, err := e.s.Wakeups(wctx)
	require.NoError(t, err)
	drain(wake)

	woken, err := ops.Wake(ctx, storage.WakeRequest{RuntimeIDs: []string{"rt-inst"}, Types: []string{"provision"}, Now: n})
	require.NoError(t, err)
	assert.Equal(t, []string{"waiting"}, woken, "only the waiting, unleased operation of the type that is due later")
	expectWake(t, wake)
	got, err := ops.GetOperation(ctx, "waiting")
	require.NoError(t, err)
	assert.Equal(t, n, *got.DueAt)
	assert.EqualValues(t, 1, got.Version, "waking does not bump the version")
	for id, due := range map[string]time.Time{"other-type": later, "already-due": n.Add(-time.Minute), "elsewhere": later, "leased": n.Add(time.Minute)} {
		op, err := ops.GetOperation(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, due, *op.DueAt, id)
	}
	done, err := ops.GetOperation(ctx, "done")
	require.NoError(t, err)
	assert.Nil(t, done.DueAt, "a finished operation is not made due")
	leased, err := ops.GetOperation(ctx, "leased")
	require.NoError(t, err)
	assert.Equal(t, "w", leased.LeaseOwner, "the lease is untouched")
	assert.Equal(t, held.Version, leased.Version)

	// By instance, any type; then by ID.
	woken, err = ops.Wake(ctx, storage.WakeRequest{InstanceIDs: []string{"inst"}, Now: n})
	require.NoError(t, err)
	assert.Equal(t, []string{"other-type"}, woken)
	woken, err = ops.Wake(ctx, storage.WakeRequest{IDs: []string{"elsewhere", "done", "missing"}, Now: n})
	require.NoError(t, err)
	assert.Equal(t, []string{"elsewhere"}, woken)

	// Nothing left to wake: an empty answer.
	woken, err = ops.Wake(ctx, storage.WakeRequest{IDs: []string{"waiting", "elsewhere"}, RuntimeIDs: []string{"rt-none"}, Now: n})
	require.NoError(t, err)
	assert.Empty(t, woken)

	// The woken operations are claimable now.
	claimed, err := ops.ClaimOperations(ctx, storage.ClaimRequest{Owner: "w2", Now: n, LeaseUntil: n.Add(time.Minute), Limit: 10})
	require.NoError(t, err)
	ids := make([]string, len(claimed))
	for i, op := range claimed {
		ids[i] = op.ID
	}
	assert.ElementsMatch(t, []string{"waiting", "other-type", "already-due", "elsewhere"}, ids)

	_, err = ops.Wake(ctx, storage.WakeRequest{Types: []string{"provision"}, Now: n})
	assert.Error(t, err, "a wake must select operations, not a whole type")
	_, err = ops.Wake(ctx, storage.WakeRequest{IDs: []string{"waiting"}})
	assert.Error(t, err, "now must be set")
}

// wakeAcrossStores: a Wake through one Store signals another Store's subscriber.
func wakeAcrossStores(t *testing.T, a, b storage.Store) {
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wake, err := b.Wakeups(wctx)
	require.NoError(t, err)
	n := now()
	mustInsertOp(t, a, newOp("sleeper", "i", "provision", storage.StateInProgress, ptr(n.Add(time.Hour))))
	time.Sleep(100 * time.Millisecond)
	drain(wake)
	woken, err := a.Operations().Wake(ctx, storage.WakeRequest{IDs: []string{"sleeper"}, Now: n})
	require.NoError(t, err)
	require.Equal(t, []string{"sleeper"}, woken)
	expectWake(t, wake)
}
