package sqlstore

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// TestDetachedSharesNothing: the operation a taker's worker runs and the one the insert's caller
// reads change apart.
func TestDetachedSharesNothing(t *testing.T) {
	due, until := time.Unix(100, 0), time.Unix(200, 0)
	op := storage.Operation{
		ID: "op", DueAt: &due, LeaseExpiresAt: &until, Data: json.RawMessage(`{"a":1}`), Secrets: storage.Secrets{"k": "v"},
		Progress: storage.Progress{FinishedStages: []string{"s"}, StageStartedAt: map[string]time.Time{"s": due},
			Steps: map[string]storage.StepProgress{"x": {Attempts: 1, RetryUntil: &until}}, ExecutedButNotCompleted: []string{"y"}},
	}
	d := detached(op)
	assert.Equal(t, op, d)

	d.Data[1] = 'b'
	d.Secrets["k"] = "changed"
	*d.DueAt, *d.LeaseExpiresAt = time.Unix(1, 0), time.Unix(2, 0)
	d.Progress.FinishedStages[0] = "t"
	d.Progress.StageStartedAt["s"] = time.Unix(3, 0)
	*d.Progress.Steps["x"].RetryUntil = time.Unix(4, 0)
	d.Progress.ExecutedButNotCompleted[0] = "z"

	assert.Equal(t, `{"a":1}`, string(op.Data))
	assert.Equal(t, "v", op.Secrets["k"])
	assert.Equal(t, time.Unix(100, 0), *op.DueAt)
	assert.Equal(t, time.Unix(200, 0), *op.LeaseExpiresAt)
	assert.Equal(t, []string{"s"}, op.Progress.FinishedStages)
	assert.Equal(t, time.Unix(100, 0), op.Progress.StageStartedAt["s"])
	assert.Equal(t, time.Unix(200, 0), *op.Progress.Steps["x"].RetryUntil)
	assert.Equal(t, []string{"y"}, op.Progress.ExecutedButNotCompleted)
}
