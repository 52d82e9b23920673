package storagetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

func orchRows(ids ...string) []storage.OrchestrationOperation {
	var out []storage.OrchestrationOperation
	for i, id := range ids {
		out = append(out, storage.OrchestrationOperation{InstanceID: id, RuntimeID: "rt-" + id, PlanID: "plan", OperationID: fmt.Sprintf("op-%s-%d", id, i),
			StoredState: storage.OrchOpPending, DueAt: now().Add(-time.Second)})
	}
	return out
}

func upgradeOp(row storage.OrchestrationOperation) storage.Operation {
	return newOp(row.OperationID, row.InstanceID, "upgradeKyma", storage.StatePending, ptr(now()))
}

func testOrchestrations(t *testing.T, e *env) {
	s := e.s.Orchestrations()
	for _, id := range []string{"i1", "i2", "i3"} {
		_, err := e.s.Instances().InsertInstance(ctx, newInstance(id))
		require.NoError(t, err)
	}
	rows := orchRows("i1", "i2", "i3")
	o, err := s.InsertOrchestration(ctx, storage.Orchestration{ID: "o1", Type: "upgradeKyma", State: "pending", Parameters: json.RawMessage(`{"a":1}`)}, rows)
	require.NoError(t, err)
	_, err = s.InsertOrchestration(ctx, o, nil)
	assert.ErrorIs(t, err, storage.ErrAlreadyExists)
	got, err := s.GetOrchestration(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, o, got)
	_, err = s.GetOrchestration(ctx, "nope")
	assert.ErrorIs(t, err, storage.ErrNotFound)

	counts, err := s.CountOrchestrationOperations(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"pending": 3}, counts)
	due, err := s.DueOrchestrationOperations(ctx, "o1", now(), 10)
	require.NoError(t, err)
	require.Len(t, due, 3)

	// One worker: the first start wins, the second waits for it.
	_, err = s.StartOrchestrationOperation(ctx, "o1", upgradeOp(rows[0]), 1, []string{"upgradeKyma", "update"})
	require.NoError(t, err)
	_, err = s.StartOrchestrationOperation(ctx, "o1", upgradeOp(rows[0]), 1, []string{"upgradeKyma"})
	assert.ErrorIs(t, err, storage.ErrConflict, "never started twice")
	_, err = s.StartOrchestrationOperation(ctx, "o1", upgradeOp(rows[1]), 1, []string{"upgradeKyma"})
	assert.ErrorIs(t, err, storage.ErrWorkersBusy)
	got, err = s.GetOrchestration(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, "in progress", got.State, "the first start moves a pending orchestration on")
	counts, err = s.CountOrchestrationOperations(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"pending": 2, "in progress": 1}, counts)

	// A busy instance: nothing is written.
	mustInsertOp(t, e.s, newOp("busy", "i2", "update", storage.StateInProgress, nil))
	_, err = s.StartOrchestrationOperation(ctx, "o1", upgradeOp(rows[1]), 2, []string{"update"})
	var busy *storage.InProgressError
	require.True(t, errors.As(err, &busy), "%v", err)
	assert.Equal(t, "busy", busy.Operation.ID)
	_, err = e.s.Operations().GetOperation(ctx, rows[1].OperationID)
	assert.ErrorIs(t, err, storage.ErrNotFound)
	require.NoError(t, s.DeferOrchestrationOperation(ctx, "o1", "i2", rows[1].OperationID, now().Add(time.Hour), "instance busy", false))
	assert.ErrorIs(t, s.DeferOrchestrationOperation(ctx, "o1", "i2", "other-op", now(), "x", false), storage.ErrConflict)
	due, err = s.DueOrchestrationOperations(ctx, "o1", now(), 10)
	require.NoError(t, err)
	require.Len(t, due, 1)
	assert.Equal(t, "i3", due[0].InstanceID)

	// The engine operation's end shows through; failed rows can be retried with new IDs.
	first, err := e.s.Operations().GetOperation(ctx, rows[0].OperationID)
	require.NoError(t, err)
	first.State, first.DueAt = storage.StateFailed, nil
	_, err = e.s.Operations().UpdateOperation(ctx, first)
	require.NoError(t, err)
	page, err := s.ListOrchestrationOperations(ctx, "o1", storage.OrchestrationOperationFilter{States: []string{"failed"}})
	require.NoError(t, err)
	require.Equal(t, 1, page.TotalCount)
	assert.Equal(t, "i1", page.Items[0].InstanceID)
	assert.Equal(t, 1, page.Items[0].Attempts)
	assert.NotNil(t, page.Items[0].StartedAt)

	_, err = s.RetryOrchestration(ctx, "o1", []string{rows[2].OperationID}, func() string { return "new" }, now())
	var invalid *storage.InvalidRetryError
	require.True(t, errors.As(err, &invalid), "a pending operation is not retried: %v", err)
	// Any number of IDs is looked up within the drivers' variable limits (issue 38: 40,000 IDs
	// failed with "too many SQL variables").
	many := []string{rows[0].OperationID}
	for i := range 40_000 {
		many = append(many, fmt.Sprintf("nope-%d", i))
	}
	_, err = s.RetryOrchestration(ctx, "o1", many, func() string { return "new" }, now())
	require.True(t, errors.As(err, &invalid), "%v", err)
	assert.Len(t, invalid.OperationIDs, 40_000, "only the unknown IDs are invalid")
	n := 0
	retried, err := s.RetryOrchestration(ctx, "o1", nil, func() string { n++; return fmt.Sprintf("retry-%d", n) }, now())
	require.NoError(t, err)
	assert.Equal(t, []string{"retry-1"}, retried)
	row, err := s.GetOrchestrationOperation(ctx, "o1", "retry-1")
	require.NoError(t, err)
	assert.Equal(t, "retrying", row.State)
	got, _ = s.GetOrchestration(ctx, "o1")
	assert.Equal(t, "retrying", got.State)

	// Cancel: rows not started are canceled; nothing runs, so the orchestration is canceled.
	res, err := s.CancelOrchestration(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, storage.CancelResult{State: "canceled", Canceled: 3}, res)
	res, err = s.CancelOrchestration(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, "canceled", res.State, "a repeated cancel changes nothing")
	_, err = s.StartOrchestrationOperation(ctx, "o1", upgradeOp(rows[2]), 5, nil)
	assert.ErrorIs(t, err, storage.ErrConflict, "a canceled row never starts")
	_, err = s.CancelOrchestration(ctx, "nope")
	assert.ErrorIs(t, err, storage.ErrNotFound)

	assert.ErrorIs(t, s.SetOrchestrationState(ctx, "o1", []string{"in progress"}, "succeeded", ""), storage.ErrConflict)
	require.NoError(t, s.SetOrchestrationState(ctx, "o1", []string{"canceled"}, "succeeded", "test"))
	_, err = s.CancelOrchestration(ctx, "o1")
	assert.ErrorIs(t, err, storage.ErrOrchestrationState, "a finished orchestration is not canceled")
	list, err := s.ListOrchestrations(ctx, storage.OrchestrationFilter{States: []string{"succeeded"}})
	require.NoError(t, err)
	assert.Equal(t, 1, list.TotalCount)
}

// Concurrent starts of different rows never exceed the workers.
func testOrchestrationWorkersConcurrent(t *testing.T, e *env) {
	s := e.s.Orchestrations()
	var ids []string
	for i := range 12 {
		id := fmt.Sprintf("c%d", i)
		ids = append(ids, id)
		_, err := e.s.Instances().InsertInstance(ctx, newInstance(id))
		require.NoError(t, err)
	}
	rows := orchRows(ids...)
	_, err := s.InsertOrchestration(ctx, storage.Orchestration{ID: "o2", Type: "upgradeKyma", State: "pending", Parameters: json.RawMessage(`{}`)}, rows)
	require.NoError(t, err)
	wins, refused := race(t, len(rows), func(i int) error {
		_, err := s.StartOrchestrationOperation(ctx, "o2", upgradeOp(rows[i]), 3, nil)
		return err
	}, storage.ErrWorkersBusy)
	assert.Equal(t, 3, wins)
	assert.Equal(t, 9, refused)
}

// One holder of a singleton lock at a time; released, another takes it.
func testSingletonLock(t *testing.T, e *env) {
	a, ok, err := e.s.TryLock(ctx, "scheduler")
	require.NoError(t, err)
	require.True(t, ok)
	_, ok2, err := e.s.TryLock(ctx, "scheduler")
	require.NoError(t, err)
	assert.False(t, ok2, "held")
	b, ok3, err := e.s.TryLock(ctx, "other-name")
	require.NoError(t, err)
	assert.True(t, ok3, "another name is another lock")
	b.Release()
	a.Release()
	select {
	case <-a.Lost():
	default:
		t.Fatal("a released lock reports it is lost")
	}
	c, ok, err := e.s.TryLock(ctx, "scheduler")
	require.NoError(t, err)
	assert.True(t, ok, "free again")
	c.Release()
}

// SingletonLockAcrossStores: for drivers whose singleton locks span processes (PostgreSQL), a
// lock held by one store is refused to another, and it is taken over once the holder's lease
// expires (as when its process hangs or dies), which the holder notices (Lost).
func SingletonLockAcrossStores(t *testing.T, open Opener) {
	key := Key(t)
	a, b := open(t, Keyring(t, key)), open(t, Keyring(t, key))
	lock, ok, err := a.TryLock(ctx, "scheduler")
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = b.TryLock(ctx, "scheduler")
	require.NoError(t, err)
	assert.False(t, ok, "another store cannot take a held lock")
	lock.Release()
	held, ok, err := b.TryLock(ctx, "scheduler")
	require.NoError(t, err)
	require.True(t, ok, "released: the other store takes it")

	// The holder's lease runs out (it hung): another store takes the lock over.
	raw, isRaw := a.(RawDB)
	require.True(t, isRaw, "the store exposes its database")
	_, err = raw.DB().ExecContext(ctx, `UPDATE singleton_leases SET expires_at = clock_timestamp() - interval '1 second' WHERE name = 'scheduler'`)
	require.NoError(t, err)
	got, ok, err := a.TryLock(ctx, "scheduler")
	require.NoError(t, err)
	assert.True(t, ok, "the holder's lease expired: taken over")
	select {
	case <-held.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("the holder did not notice that its lock was taken over")
	}
	got.Release()
	held.Release()
}

// Rows of instances deprovisioned, archived or with a deprovisioning pending or succeeded are
// skipped (no upgrade inserted, no worker used); a failed deprovisioning leaves a live instance.
func testOrchestrationSkipsDeprovisioned(t *testing.T, e *env) {
	s := e.s.Orchestrations()
	for _, id := range []string{"s1", "s2", "s3", "s4"} {
		_, err := e.s.Instances().InsertInstance(ctx, newInstance(id))
		require.NoError(t, err)
	}
	rows := orchRows("s1", "s2", "s3", "s4", "s5") // s5 has no instance
	_, err := s.InsertOrchestration(ctx, storage.Orchestration{ID: "o3", Type: "upgradeKyma", State: "pending", Parameters: json.RawMessage(`{}`)}, rows)
	require.NoError(t, err)
	inst, err := e.s.Instances().GetInstance(ctx, "s1")
	require.NoError(t, err)
	inst.DeletedAt = ptr(now())
	_, err = e.s.Instances().UpdateInstance(ctx, inst)
	require.NoError(t, err)
	mustInsertOp(t, e.s, newOp("dep-s2", "s2", "deprovision", storage.StatePending, ptr(now())))
	mustInsertOp(t, e.s, newOp("dep-s3", "s3", "deprovision", storage.StateSucceeded, nil))
	mustInsertOp(t, e.s, newOp("dep-s4", "s4", "deprovision", storage.StateFailed, nil))

	for i, want := range map[int]string{0: "", 1: "dep-s2", 2: "dep-s3", 4: ""} {
		_, err := s.StartOrchestrationOperation(ctx, "o3", upgradeOp(rows[i]), 1, []string{"upgradeKyma"})
		var skipped *storage.SkippedError
		require.True(t, errors.As(err, &skipped), "%s: %v", rows[i].InstanceID, err)
		assert.Equal(t, want, skipped.DeprovisioningID, rows[i].InstanceID)
		_, err = e.s.Operations().GetOperation(ctx, rows[i].OperationID)
		assert.ErrorIs(t, err, storage.ErrNotFound, "no upgrade of %s", rows[i].InstanceID)
		row, err := s.GetOrchestrationOperation(ctx, "o3", rows[i].OperationID)
		require.NoError(t, err)
		assert.Equal(t, storage.OrchOpSkipped, row.State)
		assert.Contains(t, row.Description, "skipped: ")
		if want != "" {
			assert.Contains(t, row.Description, want)
		}
	}
	// One worker, none used by the skips: the instance whose deprovisioning failed is upgraded.
	_, err = s.StartOrchestrationOperation(ctx, "o3", upgradeOp(rows[3]), 1, []string{"upgradeKyma"})
	require.NoError(t, err)
	counts, err := s.CountOrchestrationOperations(ctx, "o3")
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"skipped": 4, "in progress": 1}, counts)
	_, err = s.StartOrchestrationOperation(ctx, "o3", upgradeOp(rows[1]), 1, nil)
	assert.ErrorIs(t, err, storage.ErrConflict, "a skipped row never starts")
}

// A deprovisioning accepted concurrently with the row's start: either the upgrade started first
// (and the deprovisioning is queued after it) or the row is skipped without an upgrade.
func testOrchestrationStartRacesDeprovisioning(t *testing.T, e *env) {
	s := e.s.Orchestrations()
	const n = 10
	var ids []string
	for i := range n {
		id := fmt.Sprintf("r%d", i)
		ids = append(ids, id)
		_, err := e.s.Instances().InsertInstance(ctx, newInstance(id))
		require.NoError(t, err)
	}
	rows := orchRows(ids...)
	_, err := s.InsertOrchestration(ctx, storage.Orchestration{ID: "o4", Type: "upgradeKyma", State: "pending", Parameters: json.RawMessage(`{}`)}, rows)
	require.NoError(t, err)
	errs := make([]error, 2*n)
	done := make(chan struct{})
	for i := range n {
		go func() {
			_, errs[2*i] = s.StartOrchestrationOperation(ctx, "o4", upgradeOp(rows[i]), n, []string{"upgradeKyma", "deprovision"})
			done <- struct{}{}
		}()
		go func() {
			_, errs[2*i+1] = e.s.Instances().InsertOperationExclusive(ctx, newOp("dep-"+ids[i], ids[i], "deprovision", storage.StatePending, ptr(now())), []string{"deprovision"})
			done <- struct{}{}
		}()
	}
	for range 2 * n {
		<-done
	}
	skippedN := 0
	for i := range n {
		require.NoError(t, errs[2*i+1], "the deprovisioning of %s is accepted", ids[i])
		row, err := s.GetOrchestrationOperation(ctx, "o4", rows[i].OperationID)
		require.NoError(t, err)
		_, upErr := e.s.Operations().GetOperation(ctx, rows[i].OperationID)
		var skipped *storage.SkippedError
		var busy *storage.InProgressError
		switch {
		case errs[2*i] == nil:
			assert.NoError(t, upErr, "started %s has its upgrade", ids[i])
			assert.Equal(t, "in progress", row.State)
		case errors.As(errs[2*i], &skipped):
			skippedN++
			assert.Equal(t, "dep-"+ids[i], skipped.DeprovisioningID)
			assert.ErrorIs(t, upErr, storage.ErrNotFound, "skipped %s has no upgrade", ids[i])
			assert.Equal(t, storage.OrchOpSkipped, row.State)
		case errors.As(errs[2*i], &busy):
			t.Fatalf("%s: the deprovisioning is found before blocking types are: %v", ids[i], errs[2*i])
		default:
			t.Fatalf("%s: %v", ids[i], errs[2*i])
		}
	}
	t.Logf("%d of %d rows skipped, the others started before their deprovisioning", skippedN, n)
}

// Filter lists beyond what a statement can bind are refused with storage.ErrTooManyValues
// before the driver fails (issue 38: SQLite answered "too many SQL variables").
func testListLimits(t *testing.T, e *env) {
	many := make([]string, storage.MaxListValues+1)
	for i := range many {
		many[i] = fmt.Sprintf("v-%d", i)
	}
	_, err := e.s.Orchestrations().ListOrchestrations(ctx, storage.OrchestrationFilter{States: many})
	assert.ErrorIs(t, err, storage.ErrTooManyValues)
	_, err = e.s.Orchestrations().ListOrchestrationOperations(ctx, "o", storage.OrchestrationOperationFilter{States: many})
	assert.ErrorIs(t, err, storage.ErrTooManyValues)
	_, err = e.s.Lifecycle().ListRetriggers(ctx, many, nil, storage.Paging{})
	assert.ErrorIs(t, err, storage.ErrTooManyValues)
	half := many[:storage.MaxListValues/2+1]
	_, err = e.s.Lifecycle().FindRuntimes(ctx, storage.RuntimeQuery{InstanceFilter: storage.InstanceFilter{GlobalAccountIDs: half, SubAccountIDs: half}})
	assert.ErrorIs(t, err, storage.ErrTooManyValues, "the lists count together")
	_, err = e.s.Instances().ListInstances(ctx, storage.InstanceFilter{InstanceIDs: many})
	assert.ErrorIs(t, err, storage.ErrTooManyValues)
	_, err = e.s.Operations().ListOperations(ctx, storage.OperationFilter{InstanceIDs: many})
	assert.ErrorIs(t, err, storage.ErrTooManyValues)
	_, err = e.s.Events().ListEvents(ctx, storage.EventFilter{OperationIDs: many})
	assert.ErrorIs(t, err, storage.ErrTooManyValues)
	// At the bound, the drivers take it.
	page, err := e.s.Lifecycle().FindRuntimes(ctx, storage.RuntimeQuery{InstanceFilter: storage.InstanceFilter{GlobalAccountIDs: many[:storage.MaxListValues]}})
	require.NoError(t, err)
	assert.Zero(t, page.TotalCount)
}
