package engine

import (
	"context"
	"encoding/json"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
)

type testData struct {
	Trace []string `json:"trace"`
	Value int      `json:"value"`
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type runFunc func(ctx context.Context, op Operation[testData], log logrus.FieldLogger) (Operation[testData], time.Duration, error)

// funcStep is a step whose behaviour the test supplies; it counts its runs.
type funcStep struct {
	name string
	run  runFunc
	mu   sync.Mutex
	runs int
}

func (s *funcStep) Name() string { return s.name }

func (s *funcStep) Run(ctx context.Context, op Operation[testData], log logrus.FieldLogger) (Operation[testData], time.Duration, error) {
	s.mu.Lock()
	s.runs++
	s.mu.Unlock()
	if s.run == nil {
		op.Data.Trace = append(op.Data.Trace, s.name)
		return op, 0, nil
	}
	return s.run(ctx, op, log)
}

func (s *funcStep) Runs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs
}

func step(name string, run runFunc) *funcStep { return &funcStep{name: name, run: run} }

func def(s Step[testData]) StepDef[testData] { return StepDef[testData]{Step: s} }

func testLogger() logrus.FieldLogger {
	l := logrus.New()
	l.SetLevel(logrus.WarnLevel)
	if !testing.Verbose() {
		l.SetOutput(io.Discard)
	}
	return l
}

type harness struct {
	t     *testing.T
	store storage.Store
	clock *fakeClock
	eng   *Engine
}

func newHarness(t *testing.T, defs ...Definition) *harness {
	t.Helper()
	h := &harness{t: t, store: newStore(t), clock: newFakeClock()}
	h.eng = h.engine(defs...)
	return h
}

// engine builds a new engine on the same store and clock: a restart.
func (h *harness) engine(defs ...Definition) *Engine {
	h.t.Helper()
	eng, err := New(h.store, Config{Workers: 4, LeaseDuration: time.Minute, PollInterval: 10 * time.Millisecond}, testLogger(), WithClock(h.clock))
	require.NoError(h.t, err)
	for _, d := range defs {
		require.NoError(h.t, eng.Register(d))
	}
	return eng
}

func (h *harness) insert(opType string, timeout time.Duration) storage.Operation {
	h.t.Helper()
	op, err := NewOperation(opType, "instance-1", testData{}, timeout, h.clock.Now())
	require.NoError(h.t, err)
	saved, err := h.store.Operations().InsertOperation(context.Background(), op)
	require.NoError(h.t, err)
	return saved
}

func (h *harness) runDue() int {
	h.t.Helper()
	n, err := h.eng.RunDue(context.Background())
	require.NoError(h.t, err)
	return n
}

func (h *harness) get(id string) (storage.Operation, testData) {
	h.t.Helper()
	op, err := h.store.Operations().GetOperation(context.Background(), id)
	require.NoError(h.t, err)
	return op, decode(h.t, op)
}

func (h *harness) events(id string) []storage.Event {
	h.t.Helper()
	page, err := h.store.Events().ListEvents(context.Background(), storage.EventFilter{OperationIDs: []string{id}, Paging: storage.Paging{PageSize: 1000}})
	require.NoError(h.t, err)
	return page.Items
}

func eventKinds(events []storage.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Step+":"+string(e.Type))
	}
	return out
}

func decode(t *testing.T, op storage.Operation) testData {
	t.Helper()
	var d testData
	if len(op.Data) > 0 {
		require.NoError(t, json.Unmarshal(op.Data, &d))
	}
	return d
}

// runToCappedLimit runs the operation, runs it again after first, checks that its next run is
// due at limit (its wait capped there) and runs it at that time; it returns the operation then.
func (h *harness) runToCappedLimit(id string, first time.Duration, limit time.Time) storage.Operation {
	h.t.Helper()
	h.runDue()
	h.clock.Advance(first)
	h.runDue()
	got, _ := h.get(id)
	require.NotNil(h.t, got.DueAt)
	require.Equal(h.t, limit, *got.DueAt, "the wait is capped at the limit")
	h.clock.Advance(limit.Sub(h.clock.Now()))
	h.runDue()
	got, _ = h.get(id)
	return got
}

// runOnceDueIn runs what is due (exactly the operation id) and returns how long until it is due
// again.
func (h *harness) runOnceDueIn(id string) time.Duration {
	h.t.Helper()
	require.Equal(h.t, 1, h.runDue())
	got, _ := h.get(id)
	require.NotNil(h.t, got.DueAt)
	return got.DueAt.Sub(h.clock.Now())
}
