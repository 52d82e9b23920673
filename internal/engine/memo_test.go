package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// The steps of one run share a memo; a run after a wait starts with an empty one.
func TestMemoLivesForOneRun(t *testing.T) {
	loads := 0
	load := func() (string, error) { loads++; return "value", nil }
	use := func(name string) *funcStep {
		return step(name, func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
			v, err := Memo(op, "k", load)
			op.Data.Trace = append(op.Data.Trace, v)
			return op, 0, err
		})
	}
	waited := false
	wait := step("wait", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		if !waited {
			waited = true
			return op, time.Minute, nil
		}
		return op, 0, nil
	})
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{
		def(use("a")), def(use("b")), def(wait), def(use("c")), def(use("d"))}})
	require.NoError(t, err)
	h := newHarness(t, p)
	op := h.insert("provision", time.Hour)
	h.runDue()
	assert.Equal(t, 1, loads, "b found what a loaded")
	h.clock.Advance(time.Minute)
	h.runDue()
	got, data := h.get(op.ID)
	require.Equal(t, storage.StateSucceeded, got.State, got.LastError)
	assert.Equal(t, 2, loads, "the run after the wait loaded once for c and d")
	assert.Equal(t, []string{"value", "value", "value", "value"}, data.Trace)

	// Outside a run (a step called directly) every call loads; Remember keeps nothing.
	var direct Operation[testData]
	Remember(direct, "k", "kept")
	v, err := Memo(direct, "k", load)
	require.NoError(t, err)
	assert.Equal(t, "value", v)
	assert.Equal(t, 3, loads)
}

// Recall finds what an earlier step of the run remembered, of the type asked for, and nothing
// outside a run.
func TestRecall(t *testing.T) {
	var got []string
	remember := step("remember", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		Remember(op, "answer", "42")
		return op, 0, nil
	})
	recall := step("recall", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		v, ok := Recall[string](op, "answer")
		_, wrongType := Recall[int](op, "answer")
		_, missing := Recall[string](op, "question")
		got = append(got, v, fmt.Sprint(ok), fmt.Sprint(wrongType), fmt.Sprint(missing))
		return op, 0, nil
	})
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(remember), def(recall)}})
	require.NoError(t, err)
	h := newHarness(t, p)
	h.insert("provision", time.Hour)
	h.runDue()
	assert.Equal(t, []string{"42", "true", "false", "false"}, got)

	_, ok := Recall[string](Operation[testData]{}, "answer")
	assert.False(t, ok)
}
