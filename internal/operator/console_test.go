package operator_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

var ctx = context.Background()

func inOrder(p runtime.Page) []string {
	out := make([]string, len(p.Data))
	for i, d := range p.Data {
		out[i] = d.InstanceID
	}
	return out
}

func TestRuntimesSort(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// Created in this order (see newFixture); subaccounts sa-1.. follow it.
	byCreation := []string{f.provisioned, f.provisioning, f.failed, f.updating, f.deprovisioning}
	reversed := []string{f.deprovisioning, f.updating, f.failed, f.provisioning, f.provisioned}
	assert.Equal(t, byCreation, inOrder(f.get(t, "")), "default: oldest first")
	assert.Equal(t, byCreation, inOrder(f.get(t, "?sort=created_at&order=asc")))
	assert.Equal(t, reversed, inOrder(f.get(t, "?sort=created_at&order=desc")))
	assert.Equal(t, reversed, inOrder(f.get(t, "?sort=subaccount_id&order=desc")))
	assert.Equal(t, byCreation, inOrder(f.get(t, "?sort=subaccount_id")))

	// Ties (ga-3 has two runtimes) break by instance ID in the sort's direction.
	asc := inOrder(f.get(t, "?sort=global_account_id&account=ga-3"))
	desc := inOrder(f.get(t, "?sort=global_account_id&order=desc&account=ga-3"))
	require.Len(t, asc, 2)
	assert.Less(t, asc[0], asc[1])
	assert.Equal(t, []string{asc[1], asc[0]}, desc)

	// Sorted by state with a filter and paging: failed < provisioned < provisioning < updating.
	var paged []string
	for p := 1; p <= 2; p++ {
		paged = append(paged, inOrder(f.get(t, fmt.Sprintf("?sort=state&state=failed,provisioned,provisioning,updating&page_size=2&page=%d", p)))...)
	}
	assert.Equal(t, []string{f.failed, f.provisioned, f.provisioning, f.updating}, paged)

	for _, tc := range []struct{ query, want string }{
		{"?sort=secrets", `sort: unknown sort "secrets" (known: created_at, instance_id, runtime_id, global_account_id, subaccount_id, plan, region, state)`},
		{"?order=up", `order: must be asc or desc, got "up"`},
	} {
		r := f.b.Get("/runtimes" + tc.query)
		assert.Equal(t, http.StatusBadRequest, r.Status, tc.query)
		assert.Equal(t, tc.want, r.Description())
	}
}

func TestRuntimesInProgressOperationTellsItsStep(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.b.Operations(f.provisioning)[0]
	started := time.Now().UTC().Truncate(time.Millisecond)
	op.Stage = "create_runtime"
	op.Progress.Steps = map[string]storage.StepProgress{
		"Initialization": {FirstAttempt: started.Add(-time.Minute), Attempts: 1, Done: true},
		"Create_Runtime": {FirstAttempt: started, Attempts: 3},
	}
	_, err := f.b.Store.Operations().UpdateOperation(ctx, op)
	require.NoError(t, err)

	page := f.get(t, "?instance_id="+f.provisioning+","+f.failed)
	for _, d := range page.Data {
		p := d.Status.Provisioning
		require.NotNil(t, p)
		if d.InstanceID == f.failed {
			assert.Empty(t, p.Stage, "a finished operation runs no step")
			assert.Nil(t, p.CurrentStepSince)
			continue
		}
		assert.Equal(t, "create_runtime", p.Stage)
		assert.Equal(t, "Create_Runtime", p.CurrentStep)
		assert.Equal(t, 3, p.CurrentStepAttempts)
		require.NotNil(t, p.CurrentStepSince)
		assert.True(t, started.Equal(*p.CurrentStepSince))
	}
}

func TestEventsFeed(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	// An instance's events are its operations' (the store finds them through operations).
	for i := 0; i < 3; i++ {
		_, err := b.Store.Operations().InsertOperation(ctx, storage.Operation{ID: fmt.Sprint("op-", i), InstanceID: fmt.Sprint("inst-", i),
			Type: "provision", State: storage.StateSucceeded})
		require.NoError(t, err)
	}
	var in []storage.Event
	types := []storage.EventType{storage.EventSucceeded, storage.EventRetrying, storage.EventFailed, storage.EventSkipped}
	for i := 0; i < 10; i++ {
		in = append(in, storage.Event{OperationID: fmt.Sprint("op-", i%3), InstanceID: fmt.Sprint("inst-", i%3),
			Step: fmt.Sprint("s", i), Stage: fmt.Sprint("stage-", i%2), Type: types[i%4], Message: "m"})
	}
	require.NoError(t, b.Store.Events().InsertEvents(ctx, in...))
	get := func(query string) []runtime.Event {
		t.Helper()
		r := b.Get("/events" + query)
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", query, r)
		var evs []runtime.Event
		r.JSON(t, &evs)
		return evs
	}
	steps := func(evs []runtime.Event) string {
		var out []string
		for _, e := range evs {
			out = append(out, e.Step)
		}
		return strings.Join(out, ",")
	}

	all := get("")
	assert.Equal(t, "s9,s8,s7,s6,s5,s4,s3,s2,s1,s0", steps(all), "the whole fleet, newest first")
	instances := map[string]bool{}
	for i, e := range all {
		instances[e.InstanceID] = true
		assert.Equal(t, in[9-i].Stage, e.Stage, "the stage of %s", e.Step)
		assert.Equal(t, string(in[9-i].Type), e.Type)
	}
	assert.Len(t, instances, 3)

	assert.Equal(t, "s9,s5,s1", steps(get("?type=retrying")))
	assert.Equal(t, "s9,s6,s5,s2,s1", steps(get("?type=retrying,failed")))
	assert.Equal(t, "s6,s2", steps(get("?type=retrying,failed&stage=stage-0")))
	assert.Equal(t, "s9,s8,s7", steps(get("?page_size=3")))
	id := func(step int) string { return fmt.Sprint(all[9-step].ID) }
	assert.Equal(t, "s6,s5,s4", steps(get("?page_size=3&before_id="+id(7))), "older, newest first")
	assert.Equal(t, "s8,s9", steps(get("?after_id="+id(7))), "newer, oldest first")
	assert.Equal(t, "s4,s7", steps(get("?after_id="+id(3)+"&page_size=2&instance_ids=inst-1")), "a cursor pages an instance's events too")
	assert.Equal(t, "s1,s4,s7", steps(get("?instance_ids=inst-1")), "an instance's events, all, oldest first")

	for _, tc := range []struct{ query, want string }{
		{"?type=begun", `type: unknown event type "begun" (started, retrying, succeeded, failed, skipped)`},
		{"?after_id=x", `after_id: must be a positive integer (an event's id), got "x"`},
		{"?before_id=-3", `before_id: must be a positive integer (an event's id), got "-3"`},
		{"?page_size=1001", `page_size: must be an integer from 1 to 1000, got "1001"`},
		{"?page=2", `page: unknown parameter (known: instance_ids, operation_ids, type, stage, after_id, before_id, page_size, collapse)`},
	} {
		r := b.Get("/events" + tc.query)
		assert.Equal(t, http.StatusBadRequest, r.Status, tc.query)
		assert.Equal(t, tc.want, r.Description(), tc.query)
	}
}
