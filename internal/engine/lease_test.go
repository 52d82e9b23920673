package engine

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hookedStore is the real store whose ExtendLeases runs test code just before and just after
// the real call, to place a worker's writes exactly between the heartbeat's steps.
type hookedStore struct {
	storage.Store
	ops *hookedOps
}

func (s hookedStore) Operations() storage.Operations { return s.ops }

type hookedOps struct {
	storage.Operations
	before, after func()
}

func (o *hookedOps) ExtendLeases(ctx context.Context, owner string, ids []string, until time.Time) ([]string, error) {
	if o.before != nil {
		o.before()
	}
	held, err := o.Operations.ExtendLeases(ctx, owner, ids, until)
	if o.after != nil {
		o.after()
	}
	return held, err
}

type leaseHarness struct {
	*harness
	ops  *hookedOps
	logs *logtest.Hook
	def  *Process[testData]
}

// newLeaseHarness runs a one-step process whose step waits (its operation is released).
func newLeaseHarness(t *testing.T, owner string) *leaseHarness {
	t.Helper()
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{
		def(step("Check_Runtime", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
			return op, time.Second, nil
		})),
	}})
	require.NoError(t, err)
	h := &harness{t: t, store: newStore(t), clock: newFakeClock()}
	ops := &hookedOps{Operations: h.store.Operations()}
	log, hook := logtest.NewNullLogger()
	eng, err := New(hookedStore{Store: h.store, ops: ops}, Config{LeaseDuration: time.Minute, Owner: owner}, log, WithClock(h.clock))
	require.NoError(t, err)
	require.NoError(t, eng.Register(p))
	h.eng = eng
	return &leaseHarness{harness: h, ops: ops, logs: hook, def: p}
}

// claimAndHold is what the dispatcher does: claim one due operation and hold it.
func (l *leaseHarness) claimAndHold() (storage.Operation, context.Context) {
	l.t.Helper()
	claimed, sent, err := l.eng.claim(context.Background(), 1)
	require.NoError(l.t, err)
	require.Len(l.t, claimed, 1)
	return claimed[0], l.eng.hold(context.Background(), claimed[0].ID, sent)
}

func (l *leaseHarness) leaseLostWarnings() int {
	n := 0
	for _, e := range l.logs.AllEntries() {
		if strings.Contains(e.Message, "lease lost") {
			n++
		}
	}
	return n
}

// A worker releases its operation after the heartbeat took its snapshot of held operations but
// before the extension: the lease is gone by the worker's own write, not lost.
func TestHeartbeatDoesNotCallAReleaseALostLease(t *testing.T) {
	l := newLeaseHarness(t, "keb-0")
	l.insert("provision", time.Hour)
	op, ctx := l.claimAndHold()
	l.ops.before = func() { l.def.execute(ctx, l.eng.executor(), op) } // the worker's run, then its release
	l.eng.extendLeases(context.Background())
	assert.NoError(t, ctx.Err(), "the run's context is not cancelled")
	assert.Equal(t, 0, l.leaseLostWarnings())
	l.eng.unhold(ctx, op.ID)
}

// The operation is released and claimed again by this engine between the extension and its
// verdict: the new run is not the one the extension missed and must not be stopped.
func TestHeartbeatDoesNotStopTheNextRunOfAReleasedOperation(t *testing.T) {
	l := newLeaseHarness(t, "keb-0")
	l.insert("provision", time.Hour)
	op, first := l.claimAndHold()
	var second context.Context
	l.ops.before = func() { l.def.execute(first, l.eng.executor(), op) }
	l.ops.after = func() {
		l.eng.unhold(first, op.ID)
		l.clock.Advance(time.Second) // due again
		_, second = l.claimAndHold()
	}
	l.eng.extendLeases(context.Background())
	require.NotNil(t, second)
	assert.NoError(t, second.Err(), "the new run goes on")
	assert.Equal(t, 0, l.leaseLostWarnings())
}

// A lease really taken over is still noticed: the run's context is cancelled.
func TestHeartbeatStopsARunWhoseLeaseWasTakenOver(t *testing.T) {
	l := newLeaseHarness(t, "keb-0")
	l.insert("provision", time.Hour)
	op, ctx := l.claimAndHold()
	l.ops.before = func() {
		// The lease expired and another replica claimed the operation.
		_, err := l.store.Operations().ReclaimLeases(context.Background(), "keb-0", l.clock.Now(), nil)
		require.NoError(t, err)
		claimed, err := l.store.Operations().ClaimOperations(context.Background(), storage.ClaimRequest{
			Owner: "keb-1", Now: l.clock.Now(), LeaseUntil: l.clock.Now().Add(time.Minute), Limit: 1})
		require.NoError(t, err)
		require.Len(t, claimed, 1)
	}
	l.eng.extendLeases(context.Background())
	assert.Error(t, ctx.Err(), "the run is stopped")
	assert.Equal(t, 1, l.leaseLostWarnings())
	l.eng.unhold(ctx, op.ID)
}

func TestDefaultOwnerIsStableForAFixedListenAddress(t *testing.T) {
	host, err := os.Hostname()
	require.NoError(t, err)
	assert.Equal(t, host+"@127.0.0.1:8080", DefaultOwner("127.0.0.1:8080"))
	assert.Equal(t, host+"@:8080", DefaultOwner(":8080"))
	for _, addr := range []string{"", ":0", "127.0.0.1:0", "not an address"} {
		a, b := DefaultOwner(addr), DefaultOwner(addr)
		assert.NotEqual(t, a, b, "%q: no fixed port, so a name no restart reuses", addr)
		assert.True(t, strings.HasPrefix(a, host+"-"), a)
	}
	assert.Equal(t, "keb-0", Config{Owner: "keb-0", Address: "127.0.0.1:8080"}.withDefaults().Owner, "APP_ENGINE_OWNER wins")
	assert.Equal(t, host+"@127.0.0.1:8080", Config{Address: "127.0.0.1:8080"}.withDefaults().Owner)
}

// After kill -9 and a restart, the operations the dead process held move at once: the new
// process has the same owner and reclaims them, instead of waiting for their leases to expire.
// Operations leased by another owner are left alone.
func TestRestartReclaimsTheOwnersLeases(t *testing.T) {
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(step("x", nil))}})
	require.NoError(t, err)
	store := newStore(t)
	mine, theirs := insertNow(t, store, "provision"), insertNow(t, store, "provision")
	now := time.Now().UTC()
	for _, c := range []struct{ owner, id string }{{"host@127.0.0.1:8080", mine.ID}, {"other@127.0.0.1:8080", theirs.ID}} {
		// The previous life's claims, with an hour left on their leases.
		claimed, err := store.Operations().ClaimOperations(context.Background(), storage.ClaimRequest{
			Owner: c.owner, Now: now, LeaseUntil: now.Add(time.Hour), Limit: 1})
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		require.Equal(t, c.id, claimed[0].ID)
	}
	liveEngine(t, store, Config{Workers: 1, Owner: "host@127.0.0.1:8080"}, p)
	waitState(t, store, mine.ID, storage.StateSucceeded, 5*time.Second)
	got, err := store.Operations().GetOperation(context.Background(), theirs.ID)
	require.NoError(t, err)
	assert.Equal(t, storage.StatePending, got.State)
	assert.Equal(t, "other@127.0.0.1:8080", got.LeaseOwner, "a live replica's lease is not taken")
}

// A save that keeps a lease with more than two thirds left leaves its expiry and due time as
// the claim wrote them (no indexed column changes: PostgreSQL updates the row in place); once a
// third of the lease has passed, the next save renews both. Every step's outcome is still
// written before the next step runs.
func TestSaveKeepsAFreshLeaseAsItIs(t *testing.T) {
	var h *harness
	var id string
	type seen struct {
		due, lease time.Time
		done       bool
	}
	stored := map[string]seen{}
	look := func(name, prev string, advance time.Duration) *funcStep {
		return step(name, func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
			got, _ := h.get(id)
			require.NotNil(t, got.DueAt)
			require.NotNil(t, got.LeaseExpiresAt)
			stored[name] = seen{due: *got.DueAt, lease: *got.LeaseExpiresAt, done: got.Progress.Steps[prev].Done}
			h.clock.Advance(advance)
			return op, 0, nil
		})
	}
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{
		def(look("a", "", 5*time.Second)), def(look("b", "a", 25*time.Second)), def(look("c", "b", 0)), def(look("d", "c", 0)),
	}})
	require.NoError(t, err)
	h = newHarness(t, p)
	id = h.insert("provision", time.Hour).ID
	claimedAt := h.clock.Now()
	require.Equal(t, 1, h.runDue())

	claimLease := claimedAt.Add(time.Minute) // the harness's lease
	assert.Equal(t, seen{due: claimLease, lease: claimLease}, stored["a"], "as the claim wrote it")
	assert.Equal(t, seen{due: claimLease, lease: claimLease, done: true}, stored["b"], "a's outcome written 5 s later, lease fresh: left as it was")
	renewed := claimedAt.Add(30 * time.Second).Add(time.Minute)
	assert.Equal(t, seen{due: renewed, lease: renewed, done: true}, stored["c"], "30 s of the lease gone: renewed")
	assert.Equal(t, seen{due: renewed, lease: renewed, done: true}, stored["d"], "fresh again: left as it was")
	got, _ := h.get(id)
	assert.Equal(t, storage.StateSucceeded, got.State)
}

// The operation was released and handed to a new run (or claimed again) before the old run's
// worker returned: the old run's end leaves the new run's holding, context and heartbeat alone.
func TestAnOldRunsEndDoesNotStopTheNextRun(t *testing.T) {
	l := newLeaseHarness(t, "keb-0")
	old := l.eng.hold(context.Background(), "op", time.Now())
	next := l.eng.hold(context.Background(), "op", time.Now())
	l.eng.unhold(old, "op")
	assert.NoError(t, next.Err(), "the new run goes on")
	assert.Contains(t, l.eng.heldIDs(), "op", "its lease is still extended")
	l.eng.unhold(next, "op")
	assert.Error(t, next.Err())
	assert.NotContains(t, l.eng.heldIDs(), "op")
}

// A restarted owner runs what its previous life held itself: its reclaim wakes no other replica
// (they would claim all of it at once, one survivor queueing every interrupted operation behind
// its own bounds while the restarted replica idles; issue 40's rolling kill found them all on
// one replica after every restart). A live replica still gets them at its next poll.
func TestARestartedOwnerRunsWhatItReclaimed(t *testing.T) {
	var mu sync.Mutex
	ranBy := map[string]int{}
	process := func(who string) Definition {
		p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(step("x",
			func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
				mu.Lock()
				ranBy[who]++
				mu.Unlock()
				return op, 0, nil
			}))}})
		require.NoError(t, err)
		return p
	}
	base := newStore(t)
	const n = 20
	ids := make([]string, n)
	for i := range ids {
		ids[i] = insertNow(t, base, "provision").ID
	}
	now := time.Now().UTC()
	// The previous life's claims, with an hour left on their leases.
	claimed, err := base.Operations().ClaimOperations(context.Background(), storage.ClaimRequest{
		Owner: "host@127.0.0.1:8080", Now: now, LeaseUntil: now.Add(time.Hour), Limit: n})
	require.NoError(t, err)
	require.Len(t, claimed, n)

	// A live replica, asleep: a poll interval far longer than the test, so only a wake-up
	// would make it claim.
	other := withWakeProbe(base)
	liveEngine(t, other, Config{Workers: n, Owner: "other@127.0.0.1:8081", PollInterval: time.Hour}, process("other"))
	other.asleep(t, 5*time.Second)

	liveEngine(t, base, Config{Workers: n, Owner: "host@127.0.0.1:8080", PollInterval: time.Hour}, process("restarted"))
	for _, id := range ids {
		waitState(t, base, id, storage.StateSucceeded, 5*time.Second)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]int{"restarted": n}, ranBy, "the restarted owner runs what its previous life held")
}
