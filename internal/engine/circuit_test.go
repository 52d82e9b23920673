package engine

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/retryhint"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A step whose system's circuit is open runs again when the circuit lets a probe through, not
// after the step's own short interval; its event says that time and when the step gives up (the
// first of its limits), and the run at that limit is the verdict, not another try.
func TestCircuitHoldSetsTheNextTry(t *testing.T) {
	t0 := newFakeClock().Now()
	var (
		mu    sync.Mutex
		holds = []time.Duration{14 * time.Second, 14 * time.Second, 10 * time.Minute}
		ran   []time.Time
	)
	edp := step("EDP_Registration", func(ctx context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		mu.Lock()
		n := len(ran)
		ran = append(ran, op.Now())
		mu.Unlock()
		// What clientkit does when the circuit refuses the call.
		retryhint.Defer(ctx, op.Now().Add(holds[n]), "circuit to EDP open")
		return op.RetryOperation(fmt.Sprintf("EDP not called (refusal %d)", n+1), 2*time.Second, 5*time.Minute)
	})
	p, err := Staged("provision", 24*time.Hour, Stage[testData]{Name: "post_actions", Timeout: 3 * time.Minute, Steps: []StepDef[testData]{def(edp)}})
	require.NoError(t, err)
	h := newHarness(t, p)
	op := h.insert("provision", 24*time.Hour)

	require.Equal(t, 1, h.runDue())
	got, _ := h.get(op.ID)
	require.NotNil(t, got.DueAt)
	assert.Equal(t, t0.Add(14*time.Second), *got.DueAt, "due when the circuit lets a probe through, not after the step's 2 s")
	sp := got.Progress.Steps["EDP_Registration"]
	assert.Equal(t, t0.Add(3*time.Minute), sp.GivesUpAt, "the stage limit comes before the retry window (5 min) and the deadline (24 h)")
	evs := h.events(op.ID)
	require.Len(t, evs, 1)
	assert.Equal(t, storage.EventRetrying, evs[0].Type)
	assert.Equal(t, 14*time.Second, evs[0].Wait)
	assert.Equal(t, *got.DueAt, evs[0].CreatedAt.Add(evs[0].Wait), "the event's next try is the operation's due time")
	assert.Equal(t, "next try at 2026-01-01T12:00:14Z (in 14s; circuit to EDP open until then), gives up at 2026-01-01T12:03:00Z: EDP not called (refusal 1)", evs[0].Message)

	// Nothing runs it before then; at that time it runs.
	h.clock.Advance(14*time.Second - time.Millisecond)
	assert.Equal(t, 0, h.runDue(), "not before the circuit's reopen time")
	h.clock.Advance(time.Millisecond)
	require.Equal(t, 1, h.runDue())
	mu.Lock()
	assert.Equal(t, []time.Time{t0, t0.Add(14 * time.Second)}, ran)
	mu.Unlock()

	// A hold past the step's limit: the next run is at the limit, and it gives up then.
	h.clock.Advance(14 * time.Second)
	require.Equal(t, 1, h.runDue())
	got, _ = h.get(op.ID)
	assert.Equal(t, t0.Add(3*time.Minute), *got.DueAt)
	evs = h.events(op.ID)
	last := evs[len(evs)-1]
	assert.Equal(t, "no further try: gives up at 2026-01-01T12:03:00Z (in 2m32s; circuit to EDP open past then): EDP not called (refusal 3)", last.Message)
	h.clock.Advance(got.DueAt.Sub(h.clock.Now()))
	require.Equal(t, 1, h.runDue())
	got, _ = h.get(op.ID)
	assert.Equal(t, storage.StateFailed, got.State)
	assert.Contains(t, got.LastError, "stage post_actions exceeded its time limit of 3m0s")
	mu.Lock()
	assert.Len(t, ran, 3, "the run at the limit is the verdict, not a fourth try")
	mu.Unlock()
}

// The same through the real client kit, a real HTTP server on loopback and the wall clock: the
// call whose failure opens the circuit holds the step until the circuit lets a probe through;
// the step's interval (100 ms) would have run it a dozen times against the open circuit.
func TestCircuitOpenedByTheStepsCallHoldsItsRetry(t *testing.T) {
	var up atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !up.Load() {
			http.Error(w, `{"error":"EDP is down"}`, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	const cooldown = 1500 * time.Millisecond
	caller := clientkit.NewCaller("edp", time.Millisecond, time.Millisecond,
		clientkit.Calls{Attempts: 1, Timeout: 5 * time.Second, BreakerThreshold: 1, BreakerCooldown: cooldown}, nil)
	var (
		mu  sync.Mutex
		ran []time.Time
	)
	edp := step("EDP_Registration", func(ctx context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		mu.Lock()
		ran = append(ran, time.Now())
		mu.Unlock()
		err := caller.Retry(ctx, "registering the runtime in EDP", func(ctx context.Context) error {
			_, err := clientkit.DoJSON(ctx, srv.Client(), func(*http.Request) {}, http.MethodGet, srv.URL, "/namespaces/kyma/dataTenants", nil, nil, nil)
			return err
		})
		if err != nil {
			return op.RetryOperation(err.Error(), 100*time.Millisecond, time.Minute)
		}
		return op, 0, nil
	})
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "post_actions", Steps: []StepDef[testData]{def(edp)}})
	require.NoError(t, err)
	store := newStore(t)
	eng, err := New(store, Config{Workers: 1, LeaseDuration: time.Minute, PollInterval: 10 * time.Millisecond}, testLogger())
	require.NoError(t, err)
	require.NoError(t, eng.Register(p))
	ctx := context.Background()
	raw, err := NewOperation("provision", "instance-1", testData{}, time.Hour, time.Now())
	require.NoError(t, err)
	op, err := store.Operations().InsertOperation(ctx, raw)
	require.NoError(t, err)

	before := time.Now()
	n, err := eng.RunDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	after := time.Now()
	got, err := store.Operations().GetOperation(ctx, op.ID)
	require.NoError(t, err)
	require.Equal(t, clientkit.BreakerOpen, caller.Breaker().State())
	require.NotNil(t, got.DueAt)
	due := *got.DueAt
	assert.False(t, due.Before(before.Add(cooldown).Truncate(time.Microsecond)), "due %s: not before the circuit's cool-down from the run's start %s", due, before)
	assert.False(t, due.After(after.Add(cooldown)), "due %s: when the circuit opened by the run lets a probe through", due)
	assert.Equal(t, got.Progress.Steps["EDP_Registration"].RetryUntil.Round(time.Microsecond), got.Progress.Steps["EDP_Registration"].GivesUpAt.Round(time.Microsecond), "the retry window ends first")
	page, err := store.Events().ListEvents(ctx, storage.EventFilter{OperationIDs: []string{op.ID}, Paging: storage.Paging{PageSize: 100}})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	ev := page.Items[0]
	assert.WithinDuration(t, due, ev.CreatedAt.Add(ev.Wait), 2*time.Microsecond, "the event's next try is the operation's due time")
	assert.Contains(t, ev.Message, "circuit to edp open until then")
	assert.Contains(t, ev.Message, "503")

	up.Store(true)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := eng.RunDue(ctx)
		require.NoError(t, err)
		got, err = store.Operations().GetOperation(ctx, op.ID)
		require.NoError(t, err)
		if got.State == storage.StateSucceeded || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, storage.StateSucceeded, got.State, got.LastError)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, ran, 2, "no run in between against the open circuit")
	assert.False(t, ran[1].Before(due), "the second run (%s) is not before the due time %s", ran[1], due)
	assert.Equal(t, clientkit.BreakerClosed, caller.Breaker().State(), "the probe got through")
}
