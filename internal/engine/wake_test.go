package engine

import (
	"context"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// A wake (storage Operations.Wake, what the provisioner calls when its operation finishes) ends a
// wait at the engine clock's now: the operation runs again without the clock reaching its next poll.
func TestWakeEndsAWait(t *testing.T) {
	ready := false
	poll := step("poll", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		if !ready {
			return op, time.Hour, nil
		}
		return op, 0, nil
	})
	p, err := Staged("waiter", time.Hour*24, Stage[testData]{Name: "only", Steps: []StepDef[testData]{def(poll)}})
	require.NoError(t, err)
	h := newHarness(t, p)
	op := h.insert("waiter", 24*time.Hour)
	require.Equal(t, 1, h.runDue())
	require.Equal(t, 0, h.runDue(), "waiting an hour")

	ready = true
	woken, err := h.store.Operations().Wake(context.Background(), storage.WakeRequest{InstanceIDs: []string{op.InstanceID}, Now: h.clock.Now()})
	require.NoError(t, err)
	assert.Equal(t, []string{op.ID}, woken)
	assert.Equal(t, 1, h.runDue(), "runs at once, at the same clock")
	got, _ := h.get(op.ID)
	assert.Equal(t, storage.StateSucceeded, got.State)
	assert.Equal(t, 2, poll.Runs())
}
