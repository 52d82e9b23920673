// Package orchestrationtest helps end-to-end tests of orchestrations: a fleet of provisioned
// runtimes, and waiting for an orchestration while checking its counts on every poll.
package orchestrationtest

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
)

// Fleet provisions n aws runtimes (global accounts ga-0..ga-{accounts-1} in turn) and waits
// until all are provisioned; it returns their instance IDs in creation order.
func Fleet(t testing.TB, b *bt.Broker, n, accounts int) []string {
	t.Helper()
	ids := make([]string, n)
	ops := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
		ops[i] = b.Provision(ids[i], fmt.Sprintf("rt-%d", i), fmt.Sprintf("ga-%d", i%accounts))
	}
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.WaitSucceeded(ids[i], ops[i])
		}()
	}
	wg.Wait()
	return ids
}

// Finished reports whether an orchestration state is final.
func Finished(state string) bool {
	return slices.Contains([]string{dto.Succeeded, dto.Failed, dto.Canceled}, state)
}

// Status reads GET /orchestrations/{id}.
func Status(t testing.TB, b *bt.Broker, id string) dto.StatusResponse {
	t.Helper()
	r := b.Get("/orchestrations/" + id)
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	var st dto.StatusResponse
	r.JSON(t, &st)
	return st
}

// Wait polls the orchestration until done(status) (nil: until it is finished), calling check
// (when set) on every status read; it fails the test after timeout.
func Wait(t testing.TB, b *bt.Broker, id string, timeout time.Duration, done func(dto.StatusResponse) bool, check func(dto.StatusResponse)) dto.StatusResponse {
	t.Helper()
	if done == nil {
		done = func(st dto.StatusResponse) bool { return Finished(st.State) }
	}
	deadline := time.Now().Add(timeout)
	for {
		st := Status(t, b, id)
		if check != nil {
			check(st)
		}
		if done(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("orchestration %s not done after %s: %s %q %v", id, timeout, st.State, st.Description, st.OperationStats)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Operations reads every operation of the orchestration.
func Operations(t testing.TB, b *bt.Broker, id string) []dto.OperationResponse {
	t.Helper()
	var out []dto.OperationResponse
	for p := 1; ; p++ {
		r := b.Get(fmt.Sprintf("/orchestrations/%s/operations?page=%d&page_size=100", id, p))
		require.Equal(t, http.StatusOK, r.Status, "%s", r)
		var page dto.OperationResponseList
		r.JSON(t, &page)
		out = append(out, page.Data...)
		if len(out) >= page.TotalCount {
			return out
		}
	}
}
