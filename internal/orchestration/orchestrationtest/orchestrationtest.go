// Package orchestrationtest helps end-to-end tests of orchestrations: a fleet of provisioned
// runtimes, and waiting for an orchestration while checking its counts on every poll.
package orchestrationtest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
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

// MaxOverlap is the most upgrades that ran at once: each from its start (recorded in the
// transaction that inserted it) to its engine operation's last write.
func MaxOverlap(t testing.TB, store storage.Store, ops []dto.OperationResponse) int {
	t.Helper()
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, op := range ops {
		if op.StartedAt == nil {
			continue
		}
		eng, err := store.Operations().GetOperation(context.Background(), op.OperationID)
		require.NoError(t, err)
		require.False(t, eng.State.Active(), "operation %s finished", op.OperationID)
		edges = append(edges, edge{*op.StartedAt, 1}, edge{eng.UpdatedAt, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].delta < edges[j].delta
		}
		return edges[i].at.Before(edges[j].at)
	})
	most, now := 0, 0
	for _, e := range edges {
		now += e.delta
		most = max(most, now)
	}
	return most
}

// UpgradesOf counts each instance's upgradeKyma operations.
func UpgradesOf(t testing.TB, store storage.Store, ids []string) map[string]int {
	t.Helper()
	out := map[string]int{}
	page, err := store.Operations().ListOperations(context.Background(), storage.OperationFilter{InstanceIDs: ids, Types: []string{instance.TypeUpgradeKyma}, Paging: storage.Paging{PageSize: 1000}})
	require.NoError(t, err)
	for _, op := range page.Items {
		out[op.InstanceID]++
	}
	return out
}

// UpgradeKyma creates an immediate Kyma upgrade of the targets with workers and returns its ID.
func UpgradeKyma(t testing.TB, b *bt.Broker, version string, workers int, include ...map[string]any) string {
	t.Helper()
	r := b.Do(http.MethodPost, "/upgrade/kyma", map[string]any{
		"targets":  map[string]any{"include": include},
		"kyma":     map[string]any{"version": version},
		"strategy": map[string]any{"type": "parallel", "schedule": "immediate", "parallel": map[string]any{"workers": workers}},
	})
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
	var out dto.UpgradeResponse
	r.JSON(t, &out)
	return out.OrchestrationID
}
