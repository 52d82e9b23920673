package acceptance

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// resumeBound is issue 9's bound: every operation moves again within 5 s of a restart.
const resumeBound = 5 * time.Second

// restartMeasured starts the killed broker again and measures, for every operation its row
// says should run by then (leased by the dead process, or due when the new one is up), the time from the new process
// answering /healthz to the operation's first new event. It logs the figures, checks them
// against resumeBound and returns the slowest.
func (c *brokerProcess) restartMeasured() time.Duration {
	c.t.Helper()
	killedAt := time.Now()
	unfinished := c.unfinishedOperations()
	up := c.start()
	b := c.client()
	var due []string
	for _, op := range unfinished {
		if op.LeaseOwner != "" || (op.DueAt != nil && !op.DueAt.After(up)) {
			due = append(due, op.ID)
		}
	}
	require.NotEmpty(c.t, due, "no operation was in flight when the broker was killed")

	first := map[string]time.Time{}
	for deadline := up.Add(time.Minute); len(first) < len(due) && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		r := b.Get("/events?operation_ids=" + strings.Join(due, ","))
		require.Equal(c.t, http.StatusOK, r.Status, r.String())
		var evs []runtime.Event
		r.JSON(c.t, &evs)
		for _, e := range evs {
			if e.CreatedAt.After(killedAt) && first[e.OperationID].IsZero() {
				first[e.OperationID] = e.CreatedAt
			}
		}
	}
	var delays []time.Duration
	for _, id := range due {
		at, ok := first[id]
		if !assert.True(c.t, ok, "operation %s did not move within a minute of the restart", id) {
			continue
		}
		delays = append(delays, max(0, at.Sub(up)))
	}
	if len(delays) == 0 {
		return time.Minute
	}
	slices.Sort(delays)
	slowest := delays[len(delays)-1]
	c.t.Logf("restart: %d operations in flight; first new event after /healthz answered: median %s, max %s (bound %s)",
		len(due), delays[len(delays)/2].Round(time.Millisecond), slowest.Round(time.Millisecond), resumeBound)
	assert.LessOrEqual(c.t, slowest, resumeBound, "operations must move again within %s of a restart", resumeBound)
	return slowest
}

// unfinishedOperations lists the operations still to run, as their rows say.
func (c *brokerProcess) unfinishedOperations() []storage.Operation {
	c.t.Helper()
	store := c.openStore()
	defer store.Close()
	var out []storage.Operation
	for p := 1; ; p++ {
		page, err := store.Operations().ListOperations(context.Background(), storage.OperationFilter{
			States: []storage.OperationState{storage.StatePending, storage.StateInProgress},
			Paging: storage.Paging{Page: p, PageSize: 1000},
		})
		require.NoError(c.t, err)
		out = append(out, page.Items...)
		if p*1000 >= page.TotalCount {
			return out
		}
	}
}
