package lifecycle_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/catalog"
	"github.com/kyma-project/kyma-environment-broker/internal/externals"
	"github.com/kyma-project/kyma-environment-broker/internal/lifecycle"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

var ctx = context.Background()

func TestMain(m *testing.M) { pgtest.Main(m) }

// onDrivers runs test on a broker on SQLite and on PostgreSQL; opts adjusts both.
func onDrivers(t *testing.T, opts bt.Options, test func(t *testing.T, opts bt.Options)) {
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := opts
			if name == "postgres" {
				o.DatabaseURL = pgtest.NewDatabase(t)
			}
			test(t, o)
		})
	}
}

// waitFinished waits until the operation is no longer active and returns it.
func waitFinished(t *testing.T, b *bt.Broker, id string) storage.Operation {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		op, err := b.Store.Operations().GetOperation(ctx, id)
		require.NoError(t, err)
		if !op.State.Active() {
			return op
		}
		if time.Now().After(deadline) {
			t.Fatalf("operation %s did not finish: %s, %q, last error %q, stage %s", id, op.State, op.Description, op.LastError, op.Stage)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func expiryDays(t *testing.T) map[string]int {
	c, err := catalog.FromConfig(catalog.Config{})
	require.NoError(t, err)
	days := lifecycle.ExpiryDays(c)
	require.Equal(t, map[string]int{bt.TrialPlanID: 14, bt.FreePlanID: 30}, days, "the plans file's expiry_days")
	return days
}

func provision(t *testing.T, b *bt.Broker, planID string, params map[string]any, ga string) string {
	t.Helper()
	id := uuid.NewString()
	r := b.Put(bt.InstancePath(id), bt.ProvisionBody(planID, params, bt.SAPContext(ga, "sa-"+ga)))
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
	b.WaitSucceeded(id, r.Operation())
	return id
}

func runtimesOf(t *testing.T, b *bt.Broker, query string) runtime.Page {
	t.Helper()
	r := b.Get("/runtimes" + query)
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	var p runtime.Page
	r.JSON(t, &p)
	return p
}

func instanceIDs(p runtime.Page) []string {
	out := []string{}
	for _, d := range p.Data {
		out = append(out, d.InstanceID)
	}
	return out
}

// TestExpiryJob: with a test clock, trial instances expire after 14 days and free ones after
// 30, each once; the operator sees what expires soon; expired instances refuse updates and
// can still be deprovisioned.
func TestExpiryJob(t *testing.T) {
	onDrivers(t, bt.Options{}, testExpiryJob)
}

func testExpiryJob(t *testing.T, opts bt.Options) {
	clock := sandboxtest.NewClock(time.Now())
	opts.Clock = clock
	b := bt.Start(t, opts)
	trial := provision(t, b, bt.TrialPlanID, map[string]any{"name": "trial-1"}, "ga-trial")
	free := provision(t, b, bt.FreePlanID, map[string]any{"name": "free-1", "region": "eu-central-1"}, "ga-free")
	aws := provision(t, b, bt.AWSPlanID, bt.AWSParams("aws-1"), "ga-aws")
	x := lifecycle.Expirer{Store: b.Store, ExpiryDays: expiryDays(t), OperationTimeout: time.Minute}
	job := lifecycle.ExpiryJob{Expirer: x, Clock: clock, Log: steptest.Log()}

	n, err := job.Round(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing is due on the first day")
	assert.Equal(t, []string{trial}, instanceIDs(runtimesOf(t, b, "?expires_within=360h")), "within 15 days: the trial")
	assert.ElementsMatch(t, []string{trial, free}, instanceIDs(runtimesOf(t, b, "?expires_within=721h")))
	p := runtimesOf(t, b, "?instance_id="+trial)
	require.NotNil(t, p.Data[0].ExpiresAt)
	assert.WithinDuration(t, p.Data[0].Status.CreatedAt.Add(14*24*time.Hour), *p.Data[0].ExpiresAt, time.Second)
	assert.Nil(t, runtimesOf(t, b, "?instance_id="+aws).Data[0].ExpiresAt, "paid plans do not expire")

	clock.Advance(14*24*time.Hour + time.Minute)
	n, err = job.Round(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the trial")
	ops := b.Operations(trial)
	require.Equal(t, "suspension", ops[0].Type)
	assert.Equal(t, storage.StateSucceeded, waitFinished(t, b, ops[0].ID).State)
	n, err = job.Round(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "expired once")

	p = runtimesOf(t, b, "?state=expired")
	assert.Equal(t, []string{trial}, instanceIDs(p))
	assert.Equal(t, "suspended", p.Data[0].Status.State)
	require.NotNil(t, p.Data[0].ExpiredAt)
	assert.Nil(t, p.Data[0].ExpiresAt)
	assert.Equal(t, []string{trial}, instanceIDs(runtimesOf(t, b, "?state=suspended&expired=true")))

	clock.Advance(16 * 24 * time.Hour) // 30 days and a minute
	n, err = job.Round(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the free instance")
	assert.Equal(t, storage.StateSucceeded, waitFinished(t, b, b.Operations(free)[0].ID).State)
	assert.ElementsMatch(t, []string{trial, free}, instanceIDs(runtimesOf(t, b, "?expired=true")))
	assert.Equal(t, []string{aws}, instanceIDs(runtimesOf(t, b, "?expired=false")))

	// Updates are refused with a clear message, reactivation too; deprovisioning works.
	r := b.Patch(bt.InstancePath(trial), map[string]any{"service_id": bt.ServiceID, "parameters": map[string]any{"administrators": []string{"a@b.c"}}})
	assert.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r)
	assert.Contains(t, r.Description(), "expired")
	r = b.Patch(bt.InstancePath(trial), map[string]any{"service_id": bt.ServiceID, "context": map[string]any{"active": true, "globalaccount_id": "ga-trial", "subaccount_id": "sa-ga-trial"}})
	assert.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r)
	d := b.Delete(bt.DeprovisionPath(trial, bt.TrialPlanID))
	require.Equal(t, http.StatusAccepted, d.Status, "%s", d)
	b.WaitSucceeded(trial, d.Operation())
}

// notCompleted provisions a runtime and deprovisions it during an EDP outage: the
// deprovisioning succeeds with EDP_Deregistration executed but not completed.
func notCompleted(t *testing.T, opts bt.Options, name string) (*bt.Broker, string, storage.Operation) {
	opts.Externals = func(c *externals.Config) { c.Settings.CleanupRetryTime = 300 * time.Millisecond }
	b := bt.Start(t, opts)
	id := provision(t, b, bt.AWSPlanID, bt.AWSParams(name), "ga-"+name)
	sandboxtest.Outage(t, b.Sandbox, "edp")
	d := b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID))
	require.Equal(t, http.StatusAccepted, d.Status, "%s", d)
	origin := waitFinished(t, b, d.Operation())
	require.Equal(t, storage.StateSucceeded, origin.State)
	require.Equal(t, []string{"EDP_Deregistration"}, origin.Progress.ExecutedButNotCompleted)
	return b, id, origin
}

// TestRetriggerAfterOutage: an EDP outage leaves EDP_Deregistration executed but not
// completed; the job runs it again while EDP is down (still not completed), and once EDP is
// back the next run completes it. Every decision is an event of the deprovisioning.
func TestRetriggerAfterOutage(t *testing.T) {
	onDrivers(t, bt.Options{}, testRetriggerAfterOutage)
}

func testRetriggerAfterOutage(t *testing.T, opts bt.Options) {
	b, id, origin := notCompleted(t, opts, "edp-down")
	clock := sandboxtest.NewClock(time.Now())
	job := lifecycle.RetriggerJob{Store: b.Store, Clock: clock, Log: steptest.Log(), RetryInterval: 10 * time.Minute, MaxAge: 24 * time.Hour, OperationTimeout: time.Minute}
	res, err := job.Round(ctx)
	require.NoError(t, err)
	assert.Equal(t, lifecycle.RoundResult{Found: 1}, res, "recorded; the first run waits for the interval")
	res, err = job.Round(ctx)
	require.NoError(t, err)
	assert.Equal(t, lifecycle.RoundResult{}, res, "found once")

	clock.Advance(10 * time.Minute)
	res, err = job.Round(ctx)
	require.NoError(t, err)
	assert.Equal(t, lifecycle.RoundResult{Started: 1}, res)
	ops := b.Operations(id)
	first := waitFinished(t, b, ops[0].ID)
	require.NotEqual(t, origin.ID, first.ID)
	assert.Equal(t, storage.StateSucceeded, first.State)
	assert.Equal(t, []string{"EDP_Deregistration"}, first.Progress.ExecutedButNotCompleted, "EDP is still down")
	assert.False(t, first.Progress.Steps["Remove_Runtime"].Attempts > 0, "only the step left not completed runs again")

	require.NoError(t, b.Sandbox.SetFaults("edp", sandbox.Faults{}))
	clock.Advance(10 * time.Minute)
	res, err = job.Round(ctx)
	require.NoError(t, err)
	assert.Equal(t, lifecycle.RoundResult{Started: 1}, res)
	second := waitFinished(t, b, b.Operations(id)[0].ID)
	assert.Equal(t, storage.StateSucceeded, second.State)
	assert.Empty(t, second.Progress.ExecutedButNotCompleted, "EDP is back")
	assert.True(t, second.Progress.Steps["EDP_Deregistration"].Done)

	clock.Advance(10 * time.Minute)
	res, err = job.Round(ctx)
	require.NoError(t, err)
	assert.Equal(t, lifecycle.RoundResult{Completed: 1}, res)

	r := b.Get("/events?operation_ids=" + origin.ID)
	require.Equal(t, http.StatusOK, r.Status)
	var evs []runtime.Event
	r.JSON(t, &evs)
	var msgs []string
	for _, e := range evs {
		if e.Step == "Retrigger" {
			msgs = append(msgs, e.Type+": "+e.Message)
		}
	}
	require.Len(t, msgs, 4, "%v", msgs)
	assert.Contains(t, msgs[0], "EDP_Deregistration not completed")
	assert.Contains(t, msgs[1], "attempt 1")
	assert.Contains(t, msgs[2], "attempt 2")
	assert.Contains(t, msgs[2], "EDP", "a retry names the system")
	assert.True(t, strings.HasPrefix(msgs[3], "succeeded: re-trigger completed"), msgs[3])

	var page runtime.OrphanPage
	r = b.Get("/info/orphans?state=completed")
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	r.JSON(t, &page)
	require.Len(t, page.Data, 1)
	assert.Equal(t, origin.ID, page.Data[0].OperationID)
	assert.Equal(t, 2, page.Data[0].Attempts)
}

// TestRetriggerGivesUp: steps still not completed after the maximum age are orphaned
// resources, listed by GET /info/orphans with the system's answer.
func TestRetriggerGivesUp(t *testing.T) {
	t.Parallel()
	b, id, origin := notCompleted(t, bt.Options{}, "edp-gone")
	clock := sandboxtest.NewClock(time.Now())
	job := lifecycle.RetriggerJob{Store: b.Store, Clock: clock, Log: steptest.Log(), RetryInterval: time.Hour, MaxAge: 90 * time.Minute, OperationTimeout: time.Minute}
	_, err := job.Round(ctx)
	require.NoError(t, err)
	clock.Advance(time.Hour)
	res, err := job.Round(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Started)
	waitFinished(t, b, b.Operations(id)[0].ID)
	clock.Advance(time.Hour)
	res, err = job.Round(ctx)
	require.NoError(t, err)
	assert.Equal(t, lifecycle.RoundResult{Orphaned: 1}, res)

	var page runtime.OrphanPage
	r := b.Get("/info/orphans")
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	r.JSON(t, &page)
	require.Len(t, page.Data, 1)
	o := page.Data[0]
	assert.Equal(t, origin.ID, o.OperationID)
	assert.Equal(t, id, o.InstanceID)
	assert.Equal(t, []string{"EDP_Deregistration"}, o.Steps)
	assert.Contains(t, o.LastError, "EDP")
	res, err = job.Round(ctx)
	require.NoError(t, err)
	assert.Equal(t, lifecycle.RoundResult{}, res, "given up once")
	for _, q := range []string{"?state=lost", "?page=0", "?foo=1"} {
		r := b.Get("/info/orphans" + q)
		assert.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", q, r)
	}
}
