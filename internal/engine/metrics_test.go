package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMetricsReportOperationsStepsRetriesAndQueue(t *testing.T) {
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{
		def(step("Create_Runtime", waitOnce(time.Minute))),
	}})
	require.NoError(t, err)
	h := newHarness(t)
	reg := prometheus.NewRegistry()
	eng, err := New(h.store, Config{}, testLogger(), WithClock(h.clock), WithRegisterer(reg))
	require.NoError(t, err)
	require.NoError(t, eng.Register(p))
	h.eng = eng
	h.insert("provision", time.Hour)
	h.insert("provision", time.Hour)

	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP keb_queue_depth Active operations that are due and not leased.
# TYPE keb_queue_depth gauge
keb_queue_depth 2
`), "keb_queue_depth"))

	h.runDue()
	assert.Equal(t, 2.0, testutil.ToFloat64(eng.metrics.retries.WithLabelValues("provision", "Create_Runtime")))
	h.clock.Advance(time.Minute)
	h.runDue()
	assert.Equal(t, 2.0, testutil.ToFloat64(eng.metrics.finished.WithLabelValues("provision", "succeeded")))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP keb_operations Operations in the database by type and state.
# TYPE keb_operations gauge
keb_operations{state="succeeded",type="provision"} 2
# HELP keb_queue_depth Active operations that are due and not leased.
# TYPE keb_queue_depth gauge
keb_queue_depth 0
`), "keb_operations", "keb_queue_depth"))
	assert.Equal(t, 2, testutil.CollectAndCount(eng.metrics.stepDuration), "retrying and succeeded outcomes")
	// Each operation: claimed twice; saved at its wait and at its end.
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP keb_engine_writes_total The engine's durable writes of operations: claims (a worker takes the operation) and saves (progress and events).
# TYPE keb_engine_writes_total counter
keb_engine_writes_total{kind="claim",type="provision"} 4
keb_engine_writes_total{kind="save",type="provision"} 4
# HELP keb_engine_events_total Events the engine wrote, by operation type.
# TYPE keb_engine_events_total counter
keb_engine_events_total{type="provision"} 4
`), "keb_engine_writes_total", "keb_engine_events_total"))
}

func TestRetryHelpersOutsideEngine(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var op Operation[testData]
	op.Progress.Steps = map[string]storage.StepProgress{"s": {FirstAttempt: now}}
	_, wait, err := op.ForStep("s", now.Add(4*time.Minute)).RetryOperation("busy", time.Minute, 5*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, time.Minute, wait)
	_, _, err = op.ForStep("s", now.Add(5*time.Minute)).RetryOperation("busy", time.Minute, 5*time.Minute)
	assert.EqualError(t, err, "busy: step s gave up after 5m0s")
	out, wait, err := op.ForStep("s", now.Add(6*time.Minute)).RetryOperationWithoutFail("busy", time.Minute, 5*time.Minute)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, []string{"s"}, out.Progress.ExecutedButNotCompleted)
}

// keb_due_lag_seconds is how long the longest-waiting claimable operation has been due: 0 while
// operations are due now, growing while none is run, 0 again once they ran.
func TestMetricsReportDueLag(t *testing.T) {
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(step("Create_Runtime", waitOnce(0)))}})
	require.NoError(t, err)
	h := newHarness(t)
	reg := prometheus.NewRegistry()
	eng, err := New(h.store, Config{}, testLogger(), WithClock(h.clock), WithRegisterer(reg))
	require.NoError(t, err)
	require.NoError(t, eng.Register(p))
	h.eng = eng
	lag := func(want string) {
		t.Helper()
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP keb_due_lag_seconds How long the active operation that is due and not leased has waited the longest since its due time (0 when none).
# TYPE keb_due_lag_seconds gauge
keb_due_lag_seconds `+want+"\n"), "keb_due_lag_seconds"))
	}
	lag("0")
	h.insert("provision", time.Hour)
	h.clock.Advance(30 * time.Second)
	h.insert("provision", time.Hour)
	h.clock.Advance(15 * time.Second)
	lag("45")
	h.runDue()
	lag("0")
}
