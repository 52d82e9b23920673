package acceptance

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/stretchr/testify/assert"
)

// assertNoDuplicates checks every system's creation counters: each object was created once.
func assertNoDuplicates(t *testing.T, inv inventory) {
	t.Helper()
	for name, m := range map[string]map[string]int{
		"AVS evaluations": inv.AVS.CreatesByName, "IAS service providers": inv.IAS.CreatesByName, "EDP data tenants": inv.EDP.CreatesByTenant,
		"EMS instances": inv.SM.InstanceCreatesByName, "EMS bindings": inv.SM.BindingCreatesByName,
		"Director runtimes": inv.Director.RegistrationsByRuntimeID, "Event Hubs namespaces": inv.Azure.NamespaceCreatesByName,
	} {
		for key, count := range m {
			assert.Equal(t, 1, count, "%s: %s created %d times", name, key, count)
		}
	}
	for _, c := range inv.Reconciler.Clusters {
		assert.Equal(t, 1, c.Creations, "reconciler cluster %s created %d times", c.RuntimeID, c.Creations)
	}
}

// waitAll waits for every operation and fails the test with the failed ones' descriptions.
func waitAll(t *testing.T, b *bt.Broker, ids, ops []string, timeout time.Duration) {
	t.Helper()
	var wg sync.WaitGroup
	failures := make([]string, len(ids))
	for i := range ids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			lo := waitFor(b, ids[i], ops[i], timeout)
			if lo.State != domain.Succeeded {
				failures[i] = fmt.Sprintf("%s: %s %q%s", ids[i], lo.State, lo.Description, lastEventOf(b, ops[i]))
			}
		}(i)
	}
	wg.Wait()
	for _, f := range failures {
		assert.Empty(t, f)
	}
}

// lastEventOf tells where a stuck operation is, for the failure message.
func lastEventOf(b *bt.Broker, operationID string) string {
	r := b.Get("/events?operation_ids=" + operationID)
	var evs []runtime.Event
	if r.Status != http.StatusOK || r.DecodeJSON(&evs) != nil || len(evs) == 0 {
		return ""
	}
	e := evs[len(evs)-1]
	return fmt.Sprintf("; last event at %s: %s %s %q", e.CreatedAt.Format(time.RFC3339), e.Step, e.Type, e.Message)
}

// waitFor polls last_operation without failing from another goroutine.
func waitFor(b *bt.Broker, id, op string, timeout time.Duration) bt.LastOperation {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		r := b.Get(bt.LastOperationPath(id, op))
		var lo bt.LastOperation
		if r.Status == http.StatusOK && r.DecodeJSON(&lo) == nil && lo.State != domain.InProgress {
			return lo
		}
		time.Sleep(500 * time.Millisecond)
	}
	return bt.LastOperation{State: domain.InProgress, Description: "still in progress after " + timeout.String()}
}
