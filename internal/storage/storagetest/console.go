package storagetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// testRuntimeSort: every sort key orders in the database, both ways, ties broken by instance ID
// in the same direction, combined with filters and paging.
func testRuntimeSort(t *testing.T, e *env) {
	s := e.s
	base := now().Add(-time.Hour)
	// Instance IDs do not follow any other column's order, and columns tie in pairs.
	for i, id := range []string{"d", "b", "f", "a", "e", "c"} {
		in := newInstance(id)
		in.GlobalAccountID = fmt.Sprint("ga", i/2)
		in.SubAccountID = fmt.Sprint("sa", 5-i)
		in.RuntimeID = fmt.Sprint("rt", i%3)
		in.PlanID = []string{"p2", "p1"}[i%2]
		in.ProviderRegion = []string{"us", "eu", "ap"}[i%3]
		in.CreatedAt = base.Add(time.Duration(i/2) * time.Minute) // ties in pairs
		_, err := s.Instances().InsertInstance(ctx, in)
		require.NoError(t, err)
	}
	mustInsertOp(t, s, newOp("op-a", "a", "provision", storage.StateSucceeded, nil))
	mustInsertOp(t, s, newOp("op-b", "b", "provision", storage.StateFailed, nil))

	find := func(q storage.RuntimeQuery) []string {
		t.Helper()
		page, err := s.Lifecycle().FindRuntimes(ctx, q)
		require.NoError(t, err)
		out := make([]string, len(page.Items))
		for i, r := range page.Items {
			out[i] = r.InstanceID
		}
		return out
	}
	for _, tc := range []struct {
		sort      string
		asc, desc []string
	}{
		{"", []string{"b", "d", "a", "f", "c", "e"}, []string{"e", "c", "f", "a", "d", "b"}},
		{storage.SortCreatedAt, []string{"b", "d", "a", "f", "c", "e"}, []string{"e", "c", "f", "a", "d", "b"}},
		{storage.SortInstanceID, []string{"a", "b", "c", "d", "e", "f"}, []string{"f", "e", "d", "c", "b", "a"}},
		{storage.SortRuntimeID, []string{"a", "d", "b", "e", "c", "f"}, []string{"f", "c", "e", "b", "d", "a"}},
		{storage.SortGlobalAccountID, []string{"b", "d", "a", "f", "c", "e"}, []string{"e", "c", "f", "a", "d", "b"}},
		{storage.SortSubAccountID, []string{"c", "e", "a", "f", "b", "d"}, []string{"d", "b", "f", "a", "e", "c"}},
		{storage.SortPlan, []string{"a", "b", "c", "d", "e", "f"}, []string{"f", "e", "d", "c", "b", "a"}},
		{storage.SortRegion, []string{"c", "f", "b", "e", "a", "d"}, []string{"d", "a", "e", "b", "f", "c"}},
		// failed < provisioned < provisioning (no operation), as strings.
		{storage.SortState, []string{"b", "a", "c", "d", "e", "f"}, []string{"f", "e", "d", "c", "a", "b"}},
	} {
		assert.Equal(t, tc.asc, find(storage.RuntimeQuery{Sort: tc.sort}), "sort %q ascending", tc.sort)
		assert.Equal(t, tc.desc, find(storage.RuntimeQuery{Sort: tc.sort, Descending: true}), "sort %q descending", tc.sort)
	}

	// Pages of a sort are its slices; filters apply before the sort.
	var paged []string
	for p := 1; p <= 3; p++ {
		paged = append(paged, find(storage.RuntimeQuery{Sort: storage.SortRegion, Descending: true,
			InstanceFilter: storage.InstanceFilter{Paging: storage.Paging{Page: p, PageSize: 2}}})...)
	}
	assert.Equal(t, []string{"d", "a", "e", "b", "f", "c"}, paged)
	assert.Equal(t, []string{"f", "e", "d"}, find(storage.RuntimeQuery{Sort: storage.SortInstanceID, Descending: true,
		InstanceFilter: storage.InstanceFilter{PlanIDs: []string{"p2"}}}))

	_, err := s.Lifecycle().FindRuntimes(ctx, storage.RuntimeQuery{Sort: "secrets"})
	assert.ErrorContains(t, err, `unknown sort "secrets"`)
}

// testEventsFeed: the fleet-wide feed filters by type and stage, pages by ID cursors both ways,
// newest first, and every write path keeps the stage.
func testEventsFeed(t *testing.T, e *env) {
	ev := e.s.Events()
	var in []storage.Event
	types := []storage.EventType{storage.EventSucceeded, storage.EventRetrying, storage.EventFailed}
	for i := 0; i < 9; i++ {
		in = append(in, storage.Event{OperationID: fmt.Sprint("op", i), InstanceID: fmt.Sprint("i", i),
			Step: fmt.Sprint("step", i), Stage: fmt.Sprint("stage", i%2), Type: types[i%3]})
	}
	require.NoError(t, ev.InsertEvents(ctx, in...))
	steps := func(f storage.EventFilter) ([]string, []storage.Event) {
		t.Helper()
		p, err := ev.ListEvents(ctx, f)
		require.NoError(t, err)
		var out []string
		for _, e := range p.Items {
			out = append(out, e.Step)
		}
		return out, p.Items
	}
	got, all := steps(storage.EventFilter{Descending: true})
	assert.Equal(t, []string{"step8", "step7", "step6", "step5", "step4", "step3", "step2", "step1", "step0"}, got)
	for i, e := range all {
		assert.Equal(t, in[8-i].Stage, e.Stage, "the stage round-trips")
	}
	got, _ = steps(storage.EventFilter{Descending: true, Types: []storage.EventType{storage.EventRetrying}})
	assert.Equal(t, []string{"step7", "step4", "step1"}, got)
	got, _ = steps(storage.EventFilter{Types: []storage.EventType{storage.EventFailed, storage.EventRetrying}, Stages: []string{"stage0"}})
	assert.Equal(t, []string{"step2", "step4", "step8"}, got)

	// Cursor paging: before_id walks back, after_id forward, without gaps or repeats.
	id := func(step int) int64 { return all[8-step].ID }
	got, _ = steps(storage.EventFilter{Descending: true, BeforeID: id(5), Paging: storage.Paging{PageSize: 3, WithoutTotal: true}})
	assert.Equal(t, []string{"step4", "step3", "step2"}, got)
	got, _ = steps(storage.EventFilter{AfterID: id(5), Paging: storage.Paging{PageSize: 2, WithoutTotal: true}})
	assert.Equal(t, []string{"step6", "step7"}, got)
	got, _ = steps(storage.EventFilter{AfterID: id(2), BeforeID: id(5), Descending: true})
	assert.Equal(t, []string{"step4", "step3"}, got)

	// SaveProgress keeps the stage too (the engine's write path).
	op := mustInsertOp(t, e.s, newOp("op-s", "inst-s", "provision", storage.StateInProgress, ptr(now())))
	_, err := e.s.Operations().SaveProgress(ctx, op, storage.Save{}, []storage.Event{{Step: "s1", Stage: "create_runtime", Type: storage.EventSucceeded}})
	require.NoError(t, err)
	p, err := ev.ListEvents(ctx, storage.EventFilter{OperationIDs: []string{"op-s"}})
	require.NoError(t, err)
	require.Len(t, p.Items, 1)
	assert.Equal(t, "create_runtime", p.Items[0].Stage)
}
