package acceptance

import (
	"fmt"
	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The failing system's settings: a step retries a system for window, one run calls it for at
// most callTimeout. Few workers make a worker held by a sick system visible at once.
const (
	window      = 20 * time.Second
	callTimeout = 5 * time.Second
	workers     = 8
	// schedulingSlack covers the dispatcher's poll and a broker step noticing the provisioner's verdict.
	schedulingSlack = 2 * time.Second
)

// A system answering every request with an error fails, within their retry window plus one call
// timeout, the operations that need it, naming the system; operations that do not need it
// (updates) keep their normal latency meanwhile, and deprovisioning does not wait for it.
func TestASystemFailingForGood(t *testing.T) {
	c := onDefaults(t, "APP_EXTERNAL_RETRY_TIME="+window.String(), "APP_EXTERNAL_CLEANUP_RETRY_TIME="+window.String(),
		"APP_EXTERNAL_CALL_TIMEOUT="+callTimeout.String(), "APP_PROVISIONING_TIMEOUT_CLUSTER_DOMAINS="+window.String(),
		fmt.Sprintf("APP_ENGINE_WORKERS=%d", workers))
	c.start()
	b := c.client()
	bystanders, provs := provisionMany(t, b, 4, "bystander")
	waitAll(t, b, bystanders, provs, 2*time.Minute)
	normal := updateLatencies(t, b, bystanders, 10)
	t.Logf("updates, every system healthy: %s", summary(normal))

	for round, sys := range []struct{ name, system string }{{"edp", "EDP"}, {"director", "Director"}} {
		t.Run(sys.name, func(t *testing.T) {
			c.setFaults(sys.name, sandbox.Faults{ErrorRate: 1})
			defer c.setFaults(sys.name, sandbox.Faults{})
			accepted := time.Now()
			ids, ops := provisionMany(t, b, 3*workers, "failing-"+sys.name)
			during := updateLatencies(t, b, bystanders, 11+round) // a new autoScalerMax: an unchanged one is no update
			t.Logf("updates, %s at 100%% errors with %d provisionings retrying it: %s", sys.system, len(ids), summary(during))

			var took, total []time.Duration
			for i := range ids {
				lo := waitFor(b, ids[i], ops[i], 3*window)
				total = append(total, time.Since(accepted))
				assert.Equal(t, domain.Failed, lo.State, "%s: %q", ids[i], lo.Description)
				assert.Contains(t, strings.ToLower(lo.Description), strings.ToLower(sys.system), "%s: the failure names the system", ids[i])
				took = append(took, failingStepTime(t, b, ops[i]))
			}
			slices.Sort(took)
			slices.Sort(total)
			t.Logf("provisionings needing %s: the failing step gave up at most %s after its first start (window %s + call timeout %s); all failed %s after they were accepted",
				sys.system, took[len(took)-1].Round(time.Millisecond), window, callTimeout, total[len(total)-1].Round(time.Millisecond))
			assert.LessOrEqual(t, took[len(took)-1], window+callTimeout+schedulingSlack, "failed within the window plus one call timeout")
			assert.LessOrEqual(t, slices.Max(during), slices.Max(normal)+callTimeout,
				"updates do not need %s: at most one bounded call's wait for a worker", sys.system)

			// Deprovisioning never blocks on a sick system: it ends within its cleanup window,
			// saying what it left behind.
			start := time.Now()
			del := b.Delete(bt.DeprovisionPath(bystanders[0], bt.AWSPlanID))
			require.Equal(t, http.StatusAccepted, del.Status, del.String())
			lo := waitFor(b, bystanders[0], del.Operation(), 3*window)
			t.Logf("deprovisioning with %s at 100%% errors: %s in %s: %q", sys.system, lo.State, time.Since(start).Round(time.Millisecond), lo.Description)
			assert.Equal(t, domain.Succeeded, lo.State)
			assert.LessOrEqual(t, time.Since(start), window+callTimeout+schedulingSlack)
			assert.Contains(t, strings.ToLower(lo.Description), strings.ToLower(sys.system), "the description says what was left where")
			bystanders = bystanders[1:]
		})
	}
}

// updateLatencies updates every instance at once (autoScalerMax = value) and returns how long
// each took from the request to last_operation succeeded.
func updateLatencies(t *testing.T, b *bt.Broker, ids []string, value int) []time.Duration {
	t.Helper()
	out := make([]time.Duration, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		start := time.Now()
		r := b.Patch(bt.InstancePath(id), map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSPlanID, "parameters": map[string]any{"autoScalerMax": value}})
		require.Equal(t, http.StatusAccepted, r.Status, r.String())
		wg.Add(1)
		go func(i int, op string) {
			defer wg.Done()
			for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				var lo bt.LastOperation
				if r := b.Get(bt.LastOperationPath(id, op)); r.Status == http.StatusOK && r.DecodeJSON(&lo) == nil && lo.State != domain.InProgress {
					assert.Equal(t, domain.Succeeded, lo.State, "update of %s: %q", id, lo.Description)
					out[i] = time.Since(start)
					return
				}
			}
			t.Errorf("update of %s did not finish", id)
			out[i] = 2 * time.Minute
		}(i, r.Operation())
	}
	wg.Wait()
	return out
}

// summary is "median m, max x" of durations.
func summary(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("median %s, max %s (n=%d)", s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), len(s))
}

// failingStepTime is how long the step that failed an operation ran, from its first start to the
// operation's failed event: the time the step's window and its calls' timeouts bound.
func failingStepTime(t *testing.T, b *bt.Broker, operationID string) time.Duration {
	t.Helper()
	evs := events(t, b, operationID)
	var failed runtime.Event
	for _, e := range evs {
		if e.Type == "failed" {
			failed = e
		}
	}
	require.NotEmpty(t, failed.Step, "operation %s has a failed event naming its step", operationID)
	// Events are written at the end of a run with its duration: the step's first run started
	// at its first event's time less that duration.
	for _, e := range evs {
		if e.Step == failed.Step {
			return failed.CreatedAt.Sub(e.CreatedAt.Add(-time.Duration(e.DurationMS) * time.Millisecond))
		}
	}
	t.Fatalf("operation %s: step %s failed without an event", operationID, failed.Step)
	return 0
}
