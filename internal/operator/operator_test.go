package operator_test

import (
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type fixture struct {
	b *bt.Broker
	// ids by the state the runtime is in.
	provisioned, provisioning, failed, updating, deprovisioning, deprovisioned string
	runtimeID                                                                  string
}

// newFixture creates one runtime in each state, without the engine (states are set in the
// store), each created a little after the previous one.
func newFixture(t *testing.T) fixture {
	b := bt.Start(t, bt.Options{NoEngine: true})
	f := fixture{b: b}
	put := func(planID, ga, sa string, params map[string]any) (string, string) {
		id := uuid.NewString()
		r := b.Put(bt.InstancePath(id), bt.ProvisionBody(planID, params, bt.SAPContext(ga, sa)))
		require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
		time.Sleep(2 * time.Millisecond)
		return id, r.Operation()
	}
	var op string
	f.provisioned, op = put(bt.AWSPlanID, "ga-1", "sa-1", bt.AWSParams("rt1"))
	b.FinishOperation(op, storage.StateSucceeded)
	f.runtimeID = uuid.NewString()
	b.ModifyInstance(f.provisioned, func(i *storage.Instance) { i.RuntimeID = f.runtimeID })

	f.provisioning, _ = put(bt.AWSPlanID, "ga-1", "sa-2", map[string]any{"name": "rt2", "region": "us-east-1"})

	f.failed, op = put(bt.GCPPlanID, "ga-2", "sa-3", map[string]any{"name": "rt3", "region": "europe-west3"})
	b.FinishOperation(op, storage.StateFailed)

	f.updating, op = put(bt.AWSPlanID, "ga-3", "sa-4", bt.AWSParams("rt4"))
	b.FinishOperation(op, storage.StateSucceeded)
	r := b.Patch(bt.InstancePath(f.updating), map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSHAPlanID})
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r)

	f.deprovisioning, op = put(bt.AWSPlanID, "ga-3", "sa-5", bt.AWSParams("rt5"))
	b.FinishOperation(op, storage.StateSucceeded)
	r = b.Delete(bt.DeprovisionPath(f.deprovisioning, bt.AWSPlanID))
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r)

	f.deprovisioned, op = put(bt.AWSPlanID, "ga-4", "sa-6", bt.AWSParams("rt6"))
	b.FinishOperation(op, storage.StateSucceeded)
	r = b.Delete(bt.DeprovisionPath(f.deprovisioned, bt.AWSPlanID))
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
	b.FinishOperation(r.Operation(), storage.StateSucceeded)
	now := time.Now()
	b.ModifyInstance(f.deprovisioned, func(i *storage.Instance) { i.DeletedAt = &now })
	return f
}

func (f fixture) get(t *testing.T, query string) runtime.Page {
	t.Helper()
	r := f.b.Get("/runtimes" + query)
	require.Equal(t, http.StatusOK, r.Status, "%s: %s", query, r)
	var p runtime.Page
	r.JSON(t, &p)
	assert.Equal(t, len(p.Data), p.Count, query)
	return p
}

func ids(p runtime.Page) []string {
	var out []string
	for _, d := range p.Data {
		out = append(out, d.InstanceID)
	}
	sort.Strings(out)
	return out
}

func sorted(s ...string) []string {
	sort.Strings(s)
	return s
}

func TestRuntimesFilters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	all := f.get(t, "")
	assert.Equal(t, 5, all.TotalCount, "deprovisioned only when asked for")
	assert.Len(t, all.Data, 5)

	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"?account=ga-1", sorted(f.provisioned, f.provisioning)},
		{"?account=ga-1,ga-2", sorted(f.provisioned, f.provisioning, f.failed)},
		{"?account=ga-1&account=ga-4", sorted(f.provisioned, f.provisioning)},
		{"?account=ga-4&state=deprovisioned", sorted(f.deprovisioned)},
		{"?instance_id=" + f.deprovisioned, sorted(f.deprovisioned)},
		{"?subaccount=sa-3", sorted(f.failed)},
		{"?instance_id=" + f.provisioned + "," + f.failed, sorted(f.provisioned, f.failed)},
		{"?runtime_id=" + f.runtimeID, sorted(f.provisioned)},
		{"?region=us-east-1", sorted(f.provisioning)},
		{"?region=europe-west3", sorted(f.failed)},
		{"?plan=gcp", sorted(f.failed)},
		{"?plan=" + bt.GCPPlanID, sorted(f.failed)},
		{"?state=provisioned", sorted(f.provisioned)},
		{"?state=provisioning", sorted(f.provisioning)},
		{"?state=failed", sorted(f.failed)},
		{"?state=updating", sorted(f.updating)},
		{"?state=deprovisioning", sorted(f.deprovisioning)},
		{"?state=deprovisioned", sorted(f.deprovisioned)},
		{"?state=provisioned,failed", sorted(f.provisioned, f.failed)},
		{"?account=ga-3&state=updating", sorted(f.updating)},
		{"?account=ga-1&state=failed", nil},
		{"?account=nobody", nil},
	} {
		p := f.get(t, tc.query)
		assert.Equal(t, tc.want, ids(p), tc.query)
		assert.Equal(t, len(tc.want), p.TotalCount, tc.query)
	}

	p := f.get(t, "?instance_id="+f.updating)
	require.Len(t, p.Data, 1)
	d := p.Data[0]
	assert.Equal(t, "ga-3", d.GlobalAccountID)
	assert.Equal(t, "sa-4", d.SubAccountID)
	assert.Equal(t, "aws", d.ServicePlanName)
	require.NotNil(t, d.Status.Provisioning)
	assert.Equal(t, "succeeded", d.Status.Provisioning.State)
	require.NotNil(t, d.Status.Update)
	assert.Equal(t, "pending", d.Status.Update.State)
	assert.Nil(t, d.Status.Deprovisioning)
}

func TestRuntimesPaging(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var seen []string
	for page := 1; page <= 3; page++ {
		p := f.get(t, "?page_size=2&page="+string(rune('0'+page)))
		assert.Equal(t, 5, p.TotalCount)
		assert.Equal(t, min(2, 5-2*(page-1)), p.Count)
		seen = append(seen, ids(p)...)
	}
	sort.Strings(seen)
	assert.Equal(t, ids(f.get(t, "")), seen, "the pages cover every runtime once")
	p := f.get(t, "?page_size=2&page=4")
	assert.Equal(t, 5, p.TotalCount)
	assert.Empty(t, p.Data)
	p = f.get(t, "?page_size=4&page=2")
	assert.Equal(t, 1, p.Count)

	// Paging after a state filter.
	p = f.get(t, "?state=provisioned,failed,updating&page_size=2&page=2")
	assert.Equal(t, 3, p.TotalCount)
	assert.Equal(t, 1, p.Count)

	for _, q := range []string{"?page=0", "?page=x", "?page_size=0", "?page_size=1001", "?state=sleeping", "?plan=nope", "?shoot=C_1%25",
		"?op_detail=some", "?kyma_config=yes", "?expired=maybe", "?expires_within=-1h", "?expires_within=forever", "?sort=name",
		"?state=expired&expired=false", "?instance_id=" + strings.Repeat("x", 300)} {
		r := f.b.Get("/runtimes" + q)
		assert.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", q, r)
		assert.NotEmpty(t, r.Description(), q)
	}
	// Pages whose offset overflows the databases' integers are refused naming page (was 500).
	for _, q := range []string{"?page=9223372036854775807", "?page=1000001", "?page=99999999999999999999", "?page=2147483647&page_size=1000"} {
		r := f.b.Get("/runtimes" + q)
		assert.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", q, r)
		assert.Contains(t, r.Description(), "page", q)
	}
}

func TestEvents(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{})
	id, other := uuid.NewString(), uuid.NewString()
	prov := b.Provision(id, "rt-events", "ga-ev")
	otherOp := b.Provision(other, "rt-other", "ga-ev2")
	b.WaitSucceeded(id, prov)
	b.WaitSucceeded(other, otherOp)
	d := b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID))
	require.Equal(t, http.StatusAccepted, d.Status)
	b.WaitSucceeded(id, d.Operation())

	get := func(query string) []runtime.Event {
		r := b.Get("/events" + query)
		require.Equal(t, http.StatusOK, r.Status, "%s", r)
		var evs []runtime.Event
		r.JSON(t, &evs)
		return evs
	}
	steps := func(evs []runtime.Event, typ string) map[string]bool {
		out := map[string]bool{}
		for _, e := range evs {
			if e.Type == typ {
				out[e.Step] = true
			}
		}
		return out
	}

	evs := get("?instance_ids=" + id)
	require.NotEmpty(t, evs)
	ops := map[string]bool{}
	for _, e := range evs {
		assert.Equal(t, id, e.InstanceID)
		assert.NotEmpty(t, e.OperationID)
		assert.NotEmpty(t, e.Step)
		// One event per step run, at its end: no "started" events (old rows may still have them).
		assert.Contains(t, []string{"retrying", "succeeded", "failed", "skipped"}, e.Type)
		assert.False(t, e.CreatedAt.IsZero())
		ops[e.OperationID] = true
	}
	// The broker's two operations, and the provisioner's operations on the instance's runtime.
	for _, e := range evs {
		if e.OperationID != prov && e.OperationID != d.Operation() {
			assert.Equal(t, "provisioner", e.Origin, "event %d of operation %s", e.ID, e.OperationID)
		}
	}
	assert.True(t, ops[prov] && ops[d.Operation()], "both broker operations: %v", ops)
	for _, step := range []string{"Initialization", "Create_Runtime", "Check_Runtime", "Remove_Runtime"} {
		assert.False(t, steps(evs, "started")[step], "no started event for %s", step)
		assert.True(t, steps(evs, "succeeded")[step], "succeeded %s", step)
	}
	// In order (by ID, which a cursor walks; by time within each operation: two operations'
	// runs interleave, and a run's event is written when it ends).
	lastOf := map[string]runtime.Event{}
	for i, e := range evs {
		if i > 0 {
			assert.Greater(t, e.ID, evs[i-1].ID, "in order")
		}
		if prev, ok := lastOf[e.OperationID]; ok {
			assert.False(t, e.CreatedAt.Before(prev.CreatedAt), "in order within operation %s", e.OperationID)
		}
		lastOf[e.OperationID] = e
	}

	byOp := get("?operation_ids=" + d.Operation())
	require.NotEmpty(t, byOp)
	for _, e := range byOp {
		assert.Equal(t, d.Operation(), e.OperationID)
	}
	assert.True(t, steps(byOp, "succeeded")["Remove_Runtime"])
	assert.False(t, steps(byOp, "succeeded")["Create_Runtime"])

	both := get("?instance_ids=" + id + "," + other)
	assert.Greater(t, len(both), len(evs))
	assert.Empty(t, get("?instance_ids=nobody"))

	for _, e := range evs {
		if e.Step != "" {
			assert.NotEmpty(t, e.Stage, "%s %s names its stage", e.Type, e.Step)
		}
	}
}
