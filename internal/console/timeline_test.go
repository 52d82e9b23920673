package console_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// TestTimelineFromRunEnds: the engine writes one event per step run, at its end; the timeline
// places each run at created_at - duration, a wait from a retry to the step's next run, bands
// of stages, and the step running now from the operation (its current step, attempts, and the
// end of its last wait). An older operation recorded with `started` events renders as before.
func TestTimelineFromRunEnds(t *testing.T) {
	ctx := context.Background()
	b := bt.Start(t, bt.Options{NoEngine: true, NoSandbox: true})
	t0 := time.Now().UTC().Add(-10 * time.Second).Truncate(time.Millisecond)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	const id = "inst-timeline"
	inst := storage.Instance{InstanceID: id, GlobalAccountID: "ga", SubAccountID: "sa", ServiceID: bt.ServiceID, PlanID: bt.AWSPlanID,
		ProviderRegion: "eu-central-1", CreatedAt: at(-60), Parameters: json.RawMessage(`{"name":"timeline"}`)}
	old := storage.Operation{ID: "op-old", InstanceID: id, Type: instance.TypeProvision, State: storage.StateSucceeded, CreatedAt: at(-60), Deadline: at(3600)}
	_, _, err := b.Store.Instances().InsertInstanceWithOperation(ctx, inst, old)
	require.NoError(t, err)
	live := storage.Operation{ID: "op-live", InstanceID: id, Type: instance.TypeUpdate, State: storage.StateInProgress, CreatedAt: at(0), Deadline: at(3600),
		Stage: "apply", Progress: storage.Progress{Steps: map[string]storage.StepProgress{
			"Init": {FirstAttempt: at(0), Attempts: 1, Done: true}, "Optional": {Done: true, Skipped: true},
			"Apply": {FirstAttempt: at(1.5), Attempts: 2, Done: true}, "Wait_Ready": {FirstAttempt: at(4), Attempts: 3}}}}
	_, err = b.Store.Operations().InsertOperation(ctx, live)
	require.NoError(t, err)
	ev := func(op, step, stage string, typ storage.EventType, end, took, wait float64, msg string) storage.Event {
		return storage.Event{OperationID: op, InstanceID: id, Step: step, Stage: stage, Type: typ, Message: msg, CreatedAt: at(end),
			Duration: time.Duration(took * float64(time.Second)), Wait: time.Duration(wait * float64(time.Second))}
	}
	require.NoError(t, b.Store.Events().InsertEvents(ctx,
		// The old model: a started event, then the outcome.
		ev("op-old", "Create_Runtime", "", storage.EventStarted, -59, 0, 0, ""),
		ev("op-old", "Create_Runtime", "", storage.EventSucceeded, -58, 1, 0, ""),
		// The new one: run ends only.
		ev("op-live", "Init", "prepare", storage.EventSucceeded, 1, 1, 0, ""),
		ev("op-live", "Optional", "prepare", storage.EventSkipped, 1, 0, 0, "condition not met"),
		ev("op-live", "Apply", "apply", storage.EventRetrying, 2, 0.5, 1, "provisioner: HTTP 503"),
		ev("op-live", "Apply", "apply", storage.EventSucceeded, 4, 0.5, 0, ""),
		ev("op-live", "Wait_Ready", "apply", storage.EventRetrying, 5, 1, 2, "cluster not ready"),
	))

	br := newBrowser(t, b)
	br.open("/instances/"+id, `.operation[data-operation="op-live"] .step.current .bar.running`)
	const liveOp = `.operation[data-operation="op-live"] `
	// The operation renders before its events arrive: wait for every step's run.
	br.waitJS(`document.querySelectorAll('` + liveOp + `.step').length === 4`)
	steps := eval[[]string](br, `[...document.querySelectorAll('`+liveOp+`.step')].map(s => s.closest('.stage').dataset.stage + '/' + s.dataset.step)`)
	assert.Equal(t, []string{"prepare/Init", "prepare/Optional", "apply/Apply", "apply/Wait_Ready"}, steps, "steps in order, in bands of their stages")
	assert.Equal(t, []string{"Stage prepare", "Stage apply"}, eval[[]string](br, `[...document.querySelectorAll('`+liveOp+`.stage-name')].map(s => s.textContent)`))

	// Apply: a run ending at 2 s, a wait until its next run started (4 s - 0.5 s), that run.
	edges := eval[[]float64](br, `(() => { const p = (el) => [parseFloat(el.style.left), parseFloat(el.style.left) + parseFloat(el.style.width)];
		const s = document.querySelector('`+liveOp+`.step[data-step=Apply]');
		return [...p(s.querySelector('.bar.retrying')), ...p(s.querySelector('.wait')), ...p(s.querySelector('.bar.succeeded'))]; })()`)
	require.Len(t, edges, 6)
	assert.InDelta(t, edges[1], edges[2], 0.02, "the wait starts where the retried run ended")
	assert.InDelta(t, edges[3], edges[4], 0.02, "and ends where the next run started")
	assert.InDelta(t, (edges[3]-edges[2])/(edges[1]-edges[0]), 3, 0.05, "a 1.5 s wait after a 0.5 s run")

	// Wait_Ready runs now: its third run started when its 2 s wait ended (at 7 s).
	assert.Contains(t, br.text(liveOp+`.step[data-step=Wait_Ready] .step-meta`), "3 runs")
	assert.Contains(t, br.text(liveOp+`.step[data-step=Wait_Ready] .step-meta`), "running now")
	assert.Contains(t, br.text(liveOp+`.current-step`), "stage apply, step Wait_Ready (run 3)")
	edges = eval[[]float64](br, `(() => { const s = document.querySelector('`+liveOp+`.step[data-step=Wait_Ready]');
		const w = s.querySelector('.wait'), r = s.querySelector('.bar.running');
		return [parseFloat(w.style.left) + parseFloat(w.style.width), parseFloat(r.style.left)]; })()`)
	assert.InDelta(t, edges[0], edges[1], 0.02)
	assert.Equal(t, 1, eval[int](br, `document.querySelectorAll('`+liveOp+`.step.skipped').length`))

	// The old operation: one bar from its started event to its outcome, no stage recorded.
	assert.Equal(t, 1, eval[int](br, `document.querySelectorAll('.operation[data-operation="op-old"] .bar').length`))
	assert.Equal(t, "Stage not recorded", br.text(`.operation[data-operation="op-old"] .stage-name`))
	br.screenshot("instance-timeline-live")
}
