package operator_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

func getEvents(t *testing.T, b *bt.Broker, query string) []runtime.Event {
	t.Helper()
	r := b.Get("/events" + query)
	require.Equal(t, http.StatusOK, r.Status, "%s: %s", query, r)
	var evs []runtime.Event
	r.JSON(t, &evs)
	return evs
}

// The embedded provisioner's operations record their runtime as their instance: in the feed
// their events name the instance that owns the runtime (the console's link opens it) and the
// runtime, and say they are the provisioner's.
func TestEventsOfProvisionerOperationsNameTheirInstance(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{})
	id, other := uuid.NewString(), uuid.NewString()
	op := b.Provision(id, "rt-prov-events", "ga-pe")
	otherOp := b.Provision(other, "rt-prov-other", "ga-pe2")
	b.WaitSucceeded(id, op)
	b.WaitSucceeded(other, otherOp)
	runtimeOf := map[string]string{}
	brokerOps := map[string]string{} // operation -> instance
	for _, inst := range []string{id, other} {
		r := b.Get("/runtimes?instance_id=" + inst)
		require.Equal(t, http.StatusOK, r.Status, "%s", r)
		var p runtime.Page
		r.JSON(t, &p)
		require.Len(t, p.Data, 1)
		require.NotEmpty(t, p.Data[0].RuntimeID)
		runtimeOf[inst] = p.Data[0].RuntimeID
		for _, o := range b.Operations(inst) {
			brokerOps[o.ID] = inst
		}
	}

	feed := getEvents(t, b, "?page_size=1000")
	provisioner := map[string]string{} // provisioner operation -> instance
	for _, e := range feed {
		require.Contains(t, []string{id, other}, e.InstanceID, "event %d (%s %s) names an instance, not a runtime", e.ID, e.Step, e.Type)
		assert.Equal(t, runtimeOf[e.InstanceID], e.RuntimeID, "event %d names its instance's runtime", e.ID)
		if inst, ok := brokerOps[e.OperationID]; ok {
			assert.Equal(t, inst, e.InstanceID)
			assert.Empty(t, e.Origin, "the broker's event %d", e.ID)
			continue
		}
		assert.Equal(t, "provisioner", e.Origin, "event %d of operation %s is the provisioner's", e.ID, e.OperationID)
		provisioner[e.OperationID] = e.InstanceID
	}
	require.Len(t, provisioner, 2, "each instance's runtime was created by one provisioner operation")
	for opID, inst := range provisioner {
		// The operation's own events, asked by ID, say the same.
		evs := getEvents(t, b, "?operation_ids="+opID)
		require.NotEmpty(t, evs)
		for _, e := range evs {
			assert.Equal(t, inst, e.InstanceID)
			assert.Equal(t, runtimeOf[inst], e.RuntimeID)
			assert.Equal(t, "provisioner", e.Origin)
		}
		// The instance's own events include its runtime's provisioner events.
		byInstance := getEvents(t, b, "?instance_ids="+inst)
		found := false
		for _, e := range byInstance {
			assert.Equal(t, inst, e.InstanceID)
			found = found || e.OperationID == opID
		}
		assert.True(t, found, "GET /events?instance_ids=%s includes the provisioner operation %s of its runtime", inst, opID)
		// The link works: the instance named is one the runtimes list finds.
		r := b.Get("/runtimes?instance_id=" + inst)
		var p runtime.Page
		r.JSON(t, &p)
		assert.Equal(t, 1, p.TotalCount)
	}
}

// One stuck instance retrying 78 times does not push the rest of the fleet out of the feed:
// collapse=true shows its retries as one entry (repeats=78, from the first), and every other
// instance's events stay on the page; pages walk on from the entry's oldest event.
func TestEventsCollapseRepeatedRetries(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	t0 := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	givesUp := t0.Add(2 * time.Hour)
	_, err := b.Store.Operations().InsertOperation(ctx, storage.Operation{ID: "op-stuck", InstanceID: "inst-stuck", Type: "provision",
		State: storage.StateInProgress, Progress: storage.Progress{Steps: map[string]storage.StepProgress{
			"EDP_Registration": {FirstAttempt: t0, Attempts: 78, GivesUpAt: givesUp}}}})
	require.NoError(t, err)
	var in []storage.Event
	for i := 0; i < 5; i++ {
		_, err := b.Store.Operations().InsertOperation(ctx, storage.Operation{ID: fmt.Sprint("op-", i), InstanceID: fmt.Sprint("inst-", i),
			Type: "provision", State: storage.StateSucceeded})
		require.NoError(t, err)
		in = append(in, storage.Event{OperationID: fmt.Sprint("op-", i), InstanceID: fmt.Sprint("inst-", i), Step: "Create_Runtime",
			Stage: "create_runtime", Type: storage.EventSucceeded, Message: "", CreatedAt: t0.Add(time.Duration(i) * time.Second)})
	}
	for i := 0; i < 78; i++ {
		in = append(in, storage.Event{OperationID: "op-stuck", InstanceID: "inst-stuck", Step: "EDP_Registration", Stage: "post_actions",
			Type: storage.EventRetrying, Message: fmt.Sprintf("EDP not called: it failed %d times in a row", i+10),
			Wait: 14 * time.Second, CreatedAt: t0.Add(time.Minute + time.Duration(i)*15*time.Second)})
	}
	require.NoError(t, b.Store.Events().InsertEvents(ctx, in...))

	// The trap: a page of the plain feed is the stuck instance's retries only.
	plain := getEvents(t, b, "?page_size=20")
	require.Len(t, plain, 20)
	for _, e := range plain {
		assert.Equal(t, "inst-stuck", e.InstanceID)
	}

	got := getEvents(t, b, "?page_size=20&collapse=true")
	require.Len(t, got, 6, "one entry for the 78 retries, and the 5 other instances' events")
	stuck := got[0]
	assert.Equal(t, "inst-stuck", stuck.InstanceID)
	assert.Equal(t, 78, stuck.Repeats)
	all := getEvents(t, b, "?instance_ids=inst-stuck")
	require.Len(t, all, 78)
	assert.Equal(t, all[0].ID, stuck.FirstID, "the entry names its first retry")
	require.NotNil(t, stuck.FirstAt)
	assert.True(t, all[0].CreatedAt.Equal(*stuck.FirstAt))
	assert.Equal(t, all[77].ID, stuck.ID, "the entry is the newest retry")
	assert.Equal(t, all[77].Message, stuck.Message)
	require.NotNil(t, stuck.NextTryAt)
	assert.True(t, all[77].CreatedAt.Add(14*time.Second).Equal(*stuck.NextTryAt), "next try %s", stuck.NextTryAt)
	require.NotNil(t, stuck.GivesUpAt)
	assert.True(t, givesUp.Equal(*stuck.GivesUpAt), "gives up %s", stuck.GivesUpAt)
	others := map[string]bool{}
	for _, e := range got[1:] {
		others[e.InstanceID] = true
		assert.Zero(t, e.Repeats)
		assert.Nil(t, e.GivesUpAt, "only retries of an operation under way give up")
	}
	assert.Len(t, others, 5, "the rest of the fleet stays visible")

	// A smaller page: the entry, then the next page from its oldest event (before_id) goes on
	// with the others, none twice.
	first := getEvents(t, b, "?page_size=2&collapse=true")
	require.Len(t, first, 2)
	assert.Equal(t, 78, first[0].Repeats)
	cursor := first[0].FirstID
	for _, e := range first {
		if e.ID < cursor {
			cursor = e.ID
		}
	}
	rest := getEvents(t, b, "?page_size=20&collapse=true&before_id="+strconv.FormatInt(cursor, 10))
	seen := map[string]bool{first[1].InstanceID: true}
	for _, e := range rest {
		assert.False(t, seen[e.InstanceID], "%s twice", e.InstanceID)
		seen[e.InstanceID] = true
	}
	assert.Len(t, seen, 5)

	// Walking forward (after_id, oldest first): the retries are one entry, after the others.
	oldest := getEvents(t, b, "?instance_ids=inst-0")
	require.Len(t, oldest, 1)
	fwd := getEvents(t, b, "?after_id="+strconv.FormatInt(oldest[0].ID, 10)+"&page_size=20&collapse=true")
	require.Len(t, fwd, 5, "after the oldest event: four instances' events, then the retries")
	last := fwd[len(fwd)-1]
	assert.Equal(t, "inst-stuck", last.InstanceID)
	assert.Equal(t, 78, last.Repeats)
	assert.Equal(t, all[77].ID, last.ID, "the entry sits where its newest event is: the forward cursor")

	// Retries of another step, or another event between them, end an entry.
	require.NoError(t, b.Store.Events().InsertEvents(ctx,
		storage.Event{OperationID: "op-stuck", InstanceID: "inst-stuck", Step: "EDP_Registration", Stage: "post_actions", Type: storage.EventSucceeded},
		storage.Event{OperationID: "op-stuck", InstanceID: "inst-stuck", Step: "AVS_Evaluation", Stage: "post_actions", Type: storage.EventRetrying, Wait: time.Second},
		storage.Event{OperationID: "op-stuck", InstanceID: "inst-stuck", Step: "AVS_Evaluation", Stage: "post_actions", Type: storage.EventRetrying, Wait: time.Second},
	))
	got = getEvents(t, b, "?page_size=3&collapse=true")
	require.Len(t, got, 3)
	assert.Equal(t, "AVS_Evaluation", got[0].Step)
	assert.Equal(t, 2, got[0].Repeats)
	assert.Equal(t, "succeeded", got[1].Type)
	assert.Equal(t, 78, got[2].Repeats)

	r := b.Get("/events?collapse=maybe")
	assert.Equal(t, http.StatusBadRequest, r.Status)
	assert.Equal(t, `collapse: must be true or false, got "maybe"`, r.Description())
}
