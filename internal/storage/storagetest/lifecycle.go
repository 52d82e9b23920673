package storagetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

func runtimeIDs(rows []storage.RuntimeRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.InstanceID
	}
	sort.Strings(out)
	return out
}

// testRuntimeStates: the state follows the newest operation (kept on the instance by the
// database on every insert and state change) and filters and pages in the database.
func testRuntimeStates(t *testing.T, e *env) {
	s := e.s
	add := func(id, planID string, ops ...storage.Operation) {
		in := newInstance(id)
		in.PlanID = planID
		in.CreatedAt = now().Add(-time.Duration(len(id)) * time.Minute)
		_, err := s.Instances().InsertInstance(ctx, in)
		require.NoError(t, err)
		for i, op := range ops {
			op.CreatedAt = now().Add(time.Duration(i) * time.Second)
			mustInsertOp(t, s, op)
		}
	}
	add("none", "trial")
	withShoot := newOp("p1", "prov", "provision", storage.StateInProgress, nil)
	withShoot.Data = json.RawMessage(`{"shoot_name":"c-42"}`)
	add("prov", "trial", withShoot)
	add("ok", "aws", newOp("p2", "ok", "provision", storage.StateSucceeded, nil))
	add("upg", "aws", newOp("p3", "upg", "provision", storage.StateSucceeded, nil), newOp("u3", "upg", "upgradeKyma", storage.StatePending, nil))
	add("susp", "trial", newOp("p4", "susp", "provision", storage.StateSucceeded, nil), newOp("s4", "susp", "suspension", storage.StateSucceeded, nil))
	add("fail", "aws", newOp("p5", "fail", "provision", storage.StateFailed, nil))
	add("gone", "aws", newOp("p6", "gone", "provision", storage.StateSucceeded, nil), newOp("d6", "gone", "deprovision", storage.StateSucceeded, nil))
	_, err := storage.ModifyInstance(ctx, s.Instances(), "gone", func(i *storage.Instance) { i.DeletedAt = ptr(now()) })
	require.NoError(t, err)

	page, err := s.Lifecycle().FindRuntimes(ctx, storage.RuntimeQuery{})
	require.NoError(t, err)
	got, lastStates := map[string]string{}, map[string]storage.OperationState{}
	for _, r := range page.Items {
		got[r.InstanceID], lastStates[r.InstanceID] = r.State, r.LastOperationState
	}
	assert.Equal(t, map[string]string{"none": "provisioning", "prov": "provisioning", "ok": "provisioned", "upg": "upgrading",
		"susp": "suspended", "fail": "failed"}, got, "deprovisioned only when asked for")
	// A pending newest operation is kept as in progress (its first step then leaves the
	// instance as it is), on an insert of the operation and on the instance's own insert.
	assert.Equal(t, storage.StateInProgress, lastStates["upg"])
	_, _, err = s.Instances().InsertInstanceWithOperation(ctx, newInstance("queued"), newOp("q1", "queued", "provision", storage.StatePending, nil))
	require.NoError(t, err)
	changeOp(t, s, "q1", func(op *storage.Operation) { op.State = storage.StateInProgress })
	page, err = s.Lifecycle().FindRuntimes(ctx, storage.RuntimeQuery{InstanceFilter: storage.InstanceFilter{InstanceIDs: []string{"queued"}}})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	assert.Equal(t, storage.StateInProgress, page.Items[0].LastOperationState)
	assert.Equal(t, "provisioning", page.Items[0].State)
	require.NoError(t, s.Instances().DeleteInstance(ctx, "queued"))

	// A provisioning that learns its shoot name later (Check_Runtime) records it on the instance.
	changeOp(t, s, "p3", func(op *storage.Operation) { op.Data = json.RawMessage(`{"op":"p3","shoot_name":"c-43"}`) })
	// Later changes of its data keep it.
	changeOp(t, s, "p3", func(op *storage.Operation) { op.Data = json.RawMessage(`{"op":"p3 again","shoot_name":"c-43"}`) })

	// The provisioner's operations belong to runtimes (their instance_id is a runtime ID): they
	// are never an instance's newest operation, even under an instance's ID.
	late := newOp("rp", "ok", "provisioner_provision", storage.StatePending, nil)
	late.CreatedAt = now().Add(time.Hour)
	mustInsertOp(t, s, late)
	changeOp(t, s, "rp", func(op *storage.Operation) { op.State = storage.StateFailed })

	// A state change of the newest operation moves the runtime; an older one's does not.
	changeOp(t, s, "u3", func(op *storage.Operation) { op.State = storage.StateSucceeded })
	changeOp(t, s, "p4", func(op *storage.Operation) { op.State = storage.StateFailed })

	for _, tc := range []struct {
		q    storage.RuntimeQuery
		want []string
	}{
		{storage.RuntimeQuery{States: []string{"provisioned"}}, []string{"ok", "upg"}},
		{storage.RuntimeQuery{States: []string{"suspended", "deprovisioned"}}, []string{"gone", "susp"}},
		{storage.RuntimeQuery{States: []string{"provisioning"}, InstanceFilter: storage.InstanceFilter{PlanIDs: []string{"trial"}}}, []string{"none", "prov"}},
		{storage.RuntimeQuery{InstanceFilter: storage.InstanceFilter{PlanIDs: []string{"aws"}, IncludeDeleted: true}}, []string{"fail", "gone", "ok", "upg"}},
		{storage.RuntimeQuery{InstanceFilter: storage.InstanceFilter{InstanceIDs: []string{"ok", "gone"}}}, []string{"ok"}},
		{storage.RuntimeQuery{ShootNames: []string{"c-42"}}, []string{"prov"}},
		{storage.RuntimeQuery{ShootNames: []string{"c-43"}}, []string{"upg"}},
	} {
		page, err := s.Lifecycle().FindRuntimes(ctx, tc.q)
		require.NoError(t, err)
		assert.Equal(t, tc.want, runtimeIDs(page.Items), "%+v", tc.q)
		assert.Equal(t, len(tc.want), page.TotalCount)
	}

	// Paging: pages are disjoint and ordered by creation; the total counts every match.
	p1, err := s.Lifecycle().FindRuntimes(ctx, storage.RuntimeQuery{InstanceFilter: storage.InstanceFilter{Paging: storage.Paging{Page: 1, PageSize: 2}}})
	require.NoError(t, err)
	p2, err := s.Lifecycle().FindRuntimes(ctx, storage.RuntimeQuery{InstanceFilter: storage.InstanceFilter{Paging: storage.Paging{Page: 2, PageSize: 2}}})
	require.NoError(t, err)
	assert.Equal(t, 6, p1.TotalCount)
	require.Len(t, p1.Items, 2)
	require.Len(t, p2.Items, 2)
	assert.NotContains(t, runtimeIDs(p1.Items), p2.Items[0].InstanceID)
	assert.True(t, !p1.Items[1].CreatedAt.After(p2.Items[0].CreatedAt))

	counts, err := s.Lifecycle().CountRuntimes(ctx)
	require.NoError(t, err)
	total := 0
	for _, c := range counts {
		total += c.Count
		assert.NotEqual(t, "deprovisioned", c.State)
	}
	assert.Equal(t, 6, total)
}

// testRuntimeStateOfTheFirstOperation: an instance inserted with its first operation holds that
// operation's state from the start and follows its changes.
func testRuntimeStateOfTheFirstOperation(t *testing.T, e *env) {
	s := e.s
	state := func() string {
		page, err := s.Lifecycle().FindRuntimes(ctx, storage.RuntimeQuery{InstanceFilter: storage.InstanceFilter{InstanceIDs: []string{"first"}}})
		require.NoError(t, err)
		require.Len(t, page.Items, 1)
		return page.Items[0].State
	}
	_, op, err := s.Instances().InsertInstanceWithOperation(ctx, newInstance("first"), newOp("pf", "first", "provision", storage.StateSucceeded, nil))
	require.NoError(t, err)
	assert.Equal(t, "provisioned", state())
	op.State = storage.StateFailed
	_, err = s.Operations().UpdateOperation(ctx, op)
	require.NoError(t, err)
	assert.Equal(t, "failed", state())
}

// testExpire: the expiry time and the suspension are written together, once; an active
// operation or an archived instance refuses both.
func testExpire(t *testing.T, e *env) {
	s := e.s
	_, err := s.Instances().InsertInstance(ctx, newInstance("exp"))
	require.NoError(t, err)
	mustInsertOp(t, s, newOp("p", "exp", "provision", storage.StateInProgress, nil))
	at := now().Add(-time.Hour)
	_, err = s.Lifecycle().ExpireWithOperation(ctx, newOp("s1", "exp", "suspension", storage.StatePending, ptr(now())), at, []string{"provision", "suspension"})
	var busy *storage.InProgressError
	require.ErrorAs(t, err, &busy)
	inst, err := s.Instances().GetInstance(ctx, "exp")
	require.NoError(t, err)
	assert.Nil(t, inst.ExpiredAt, "a refused expiry writes nothing")

	op, err := s.Operations().GetOperation(ctx, "p")
	require.NoError(t, err)
	op.State = storage.StateSucceeded
	_, err = s.Operations().UpdateOperation(ctx, op)
	require.NoError(t, err)
	_, err = s.Lifecycle().ExpireWithOperation(ctx, newOp("s1", "exp", "suspension", storage.StatePending, ptr(now())), at, []string{"provision", "suspension"})
	require.NoError(t, err)
	_, err = s.Lifecycle().ExpireWithOperation(ctx, newOp("s2", "exp", "suspension", storage.StatePending, ptr(now())), now(), []string{"provision", "suspension"})
	require.ErrorAs(t, err, &busy, "one suspension at a time")
	inst, err = s.Instances().GetInstance(ctx, "exp")
	require.NoError(t, err)
	require.NotNil(t, inst.ExpiredAt)
	assert.True(t, inst.ExpiredAt.Equal(at))
	// UpdateInstance keeps the expiry.
	inst, err = s.Instances().UpdateInstance(ctx, inst)
	require.NoError(t, err)
	assert.NotNil(t, inst.ExpiredAt)
	expired := true
	page, err := s.Lifecycle().FindRuntimes(ctx, storage.RuntimeQuery{Expired: &expired})
	require.NoError(t, err)
	assert.Equal(t, []string{"exp"}, runtimeIDs(page.Items))

	_, err = s.Lifecycle().ExpireWithOperation(ctx, newOp("s3", "nope", "suspension", storage.StatePending, nil), at, nil)
	assert.ErrorIs(t, err, storage.ErrNotFound)

	// Concurrent expiries of one instance: one suspension, the others see it running.
	_, err = s.Instances().InsertInstance(ctx, newInstance("race"))
	require.NoError(t, err)
	var wg sync.WaitGroup
	results := make(chan error, 10)
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := s.Lifecycle().ExpireWithOperation(ctx, newOp(fmt.Sprintf("race-%d", i), "race", "suspension", storage.StatePending, ptr(now())), now(), []string{"suspension"})
			results <- err
		}(i)
	}
	wg.Wait()
	close(results)
	won := 0
	for err := range results {
		if err == nil {
			won++
			continue
		}
		require.ErrorAs(t, err, &busy)
	}
	assert.Equal(t, 1, won)
}

// testRetriggers: operations that left steps not completed are found once; the operations
// the job creates are not origins of their own.
func testRetriggers(t *testing.T, e *env) {
	s := e.s
	_, err := s.Instances().InsertInstance(ctx, newInstance("rt"))
	require.NoError(t, err)
	left := newOp("d1", "rt", "deprovision", storage.StateSucceeded, nil)
	left.Progress.ExecutedButNotCompleted = []string{"EDP_Deregistration"}
	mustInsertOp(t, s, left)
	mustInsertOp(t, s, newOp("d0", "rt", "deprovision", storage.StateSucceeded, nil))

	since := now().Add(-time.Hour)
	ops, err := s.Lifecycle().NotCompletedOperations(ctx, []string{"deprovision"}, since, 10)
	require.NoError(t, err)
	require.Len(t, ops, 1)
	assert.Equal(t, "d1", ops[0].ID)

	r := storage.Retrigger{OriginID: "d1", InstanceID: "rt", OriginType: "deprovision", Steps: []string{"EDP_Deregistration"},
		State: storage.RetriggerRetrying, NextAt: now()}
	require.NoError(t, s.Lifecycle().InsertRetrigger(ctx, r))
	assert.ErrorIs(t, s.Lifecycle().InsertRetrigger(ctx, r), storage.ErrAlreadyExists)

	again := newOp("d2", "rt", "deprovision", storage.StatePending, ptr(now()))
	again.Progress.ExecutedButNotCompleted = []string{"EDP_Deregistration"}
	r.Attempts = 1
	_, err = s.Lifecycle().InsertRetriggerOperation(ctx, r, again, []string{"deprovision"})
	require.NoError(t, err)
	_, err = s.Lifecycle().InsertRetriggerOperation(ctx, r, newOp("d3", "rt", "deprovision", storage.StatePending, nil), []string{"deprovision"})
	var busy *storage.InProgressError
	require.True(t, errors.As(err, &busy), "one re-trigger operation at a time: %v", err)

	op, err := s.Operations().GetOperation(ctx, "d2")
	require.NoError(t, err)
	op.State = storage.StateSucceeded
	_, err = s.Operations().UpdateOperation(ctx, op)
	require.NoError(t, err)
	ops, err = s.Lifecycle().NotCompletedOperations(ctx, []string{"deprovision"}, since, 10)
	require.NoError(t, err)
	assert.Empty(t, ops, "the origin is known and d2 is the job's own")

	page, err := s.Lifecycle().ListRetriggers(ctx, []string{storage.RetriggerRetrying}, ptr(now().Add(time.Minute)), storage.Paging{})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	got := page.Items[0]
	assert.Equal(t, "d2", got.LastOperationID)
	assert.Equal(t, 1, got.Attempts)
	assert.Equal(t, []string{"EDP_Deregistration"}, got.Steps)
	got.State, got.Steps, got.LastError = storage.RetriggerOrphaned, []string{"X"}, "EDP: 503"
	require.NoError(t, s.Lifecycle().UpdateRetrigger(ctx, got))
	page, err = s.Lifecycle().ListRetriggers(ctx, []string{storage.RetriggerOrphaned}, nil, storage.Paging{})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	raw, _ := json.Marshal(page.Items[0].Steps)
	assert.Equal(t, `["X"]`, string(raw))
	assert.ErrorIs(t, s.Lifecycle().UpdateRetrigger(ctx, storage.Retrigger{OriginID: "none"}), storage.ErrNotFound)
}

// changeOp reads operation id, applies change and writes it back (UpdateOperation).
func changeOp(t *testing.T, s storage.Store, id string, change func(*storage.Operation)) {
	t.Helper()
	op, err := s.Operations().GetOperation(ctx, id)
	require.NoError(t, err)
	change(&op)
	_, err = s.Operations().UpdateOperation(ctx, op)
	require.NoError(t, err)
}
