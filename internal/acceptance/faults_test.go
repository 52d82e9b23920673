package acceptance

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var allSystems = []string{"avs", "edp", "ias", "servicemanager", "azure", "reconciler", "director"}

// faultyRun is the acceptance run's size and faults; KEB_ACCEPTANCE_RUNTIMES and
// KEB_ACCEPTANCE_LATENCY change them for local experiments.
func faultyRun(t *testing.T) (int, sandbox.Faults) {
	n, latency := 50, 2*time.Second
	if v := os.Getenv("KEB_ACCEPTANCE_RUNTIMES"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	if v := os.Getenv("KEB_ACCEPTANCE_LATENCY"); v != "" {
		var err error
		latency, err = time.ParseDuration(v)
		require.NoError(t, err)
	}
	// 30% of requests fail before the system sees them; 10% more are handled but their answer is
	// lost, which only idempotent retries survive without duplicates.
	return n, sandbox.Faults{ErrorRate: 0.3, LostResponseRate: 0.1, Latency: latency}
}

// Every system answers slowly and fails often, and the broker, a child process on SQLite, is
// killed (SIGKILL) twice during the provisionings and once during the deprovisionings: after each
// restart the operations go on from where their rows say. Every provisioning and deprovisioning
// succeeds, each system holds exactly one object per runtime, and nothing is left behind.
func TestFiftyRuntimesUnderInjectedFaultsAndKills(t *testing.T) {
	n, faults := faultyRun(t)
	sb, err := standins.New(standins.Options{})
	require.NoError(t, err)
	srv := httptest.NewServer(sb)
	defer srv.Close()
	for _, sys := range allSystems {
		require.NoError(t, sb.SetFaults(sys, faults))
	}
	child := newChildBroker(t, srv.URL, "APP_ENGINE_WORKERS=256",
		"APP_EXTERNAL_CALL_TIMEOUT=3m", "APP_EXTERNAL_RETRY_TIME=20m", "APP_EXTERNAL_CLEANUP_RETRY_TIME=10m")
	child.start()
	b := bt.Remote(t, child.url)

	start := time.Now()
	ids, ops := provisionMany(t, b, n, "fault")
	for range 2 {
		killWhenBusy(t, child, sb, 12*n)
		child.start()
	}
	waitAll(t, b, ids, ops, 15*time.Minute)
	t.Logf("%d provisionings under faults %+v and 2 kills: %s", n, faults, time.Since(start).Round(time.Second))

	inv := readInventory(t, srv.URL)
	assertOnePerRuntime(t, inv, n)
	for _, c := range inv.Reconciler.Clusters {
		assert.Equal(t, 1, c.ConfigurationVersionsCreated, "cluster %s: a retried apply must not create a configuration", c.RuntimeID)
	}

	start = time.Now()
	ops = deprovisionAll(t, b, ids)
	killWhenBusy(t, child, sb, 8*n)
	child.start()
	waitAll(t, b, ids, ops, 15*time.Minute)
	t.Logf("%d deprovisionings under faults and 1 kill: %s", n, time.Since(start).Round(time.Second))
	store := child.openStore()
	for _, op := range ops {
		got, err := store.Operations().GetOperation(context.Background(), op)
		require.NoError(t, err)
		assert.Empty(t, got.Progress.ExecutedButNotCompleted, "operation %s gave up on a cleanup", op)
	}

	assertNothingLeft(t, readInventory(t, srv.URL))
	for _, sys := range allSystems {
		st, err := sb.Stats(sys)
		require.NoError(t, err)
		t.Logf("%s: %+v", sys, st)
	}
}

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
				failures[i] = fmt.Sprintf("%s: %s %q", ids[i], lo.State, lo.Description)
			}
		}(i)
	}
	wg.Wait()
	for _, f := range failures {
		assert.Empty(t, f)
	}
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
