package broker_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// drivers starts a broker on each storage driver.
var drivers = map[string]func(t *testing.T) *bt.Broker{
	"sqlite":   func(t *testing.T) *bt.Broker { return bt.Start(t, bt.Options{}) },
	"postgres": func(t *testing.T) *bt.Broker { return bt.Start(t, bt.Options{DatabaseURL: pgtest.NewDatabase(t)}) },
}

func runtimeOf(t *testing.T, b *bt.Broker, id string) runtime.DTO {
	t.Helper()
	r := b.Get("/runtimes?instance_id=" + id)
	requireStatus(t, http.StatusOK, r)
	var page runtime.Page
	r.JSON(t, &page)
	require.Len(t, page.Data, 1, "%s", r)
	return page.Data[0]
}

// TestEndToEnd runs an instance's life through HTTP on both storage drivers.
func TestEndToEnd(t *testing.T) {
	for name, start := range drivers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := start(t)
			id := newID()

			prov := b.Provision(id, "rt-e2e", "ga-e2e")
			assert.Equal(t, "provisioning", runtimeOf(t, b, id).Status.State)
			b.WaitSucceeded(id, prov)
			rt := runtimeOf(t, b, id)
			assert.Equal(t, "provisioned", rt.Status.State)
			assert.NotEmpty(t, rt.RuntimeID)
			assert.Regexp(t, `^https://console\.\S+\.simulated\.kyma\.local$`, rt.DashboardURL, "the console the provisioner registered in the Director")
			require.NotNil(t, rt.Status.Provisioning)
			assert.Equal(t, prov, rt.Status.Provisioning.OperationID)
			assert.Equal(t, "succeeded", rt.Status.Provisioning.State)
			assert.Equal(t, "aws", rt.ServicePlanName)

			u := b.Patch(bt.InstancePath(id), map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSHAPlanID, "parameters": map[string]any{"autoScalerMax": 40}})
			requireStatus(t, http.StatusAccepted, u)
			assert.Equal(t, "updating", runtimeOf(t, b, id).Status.State)
			b.WaitSucceeded(id, u.Operation())
			rt = runtimeOf(t, b, id)
			assert.Equal(t, "provisioned", rt.Status.State)
			assert.Equal(t, "aws_ha", rt.ServicePlanName)
			require.NotNil(t, rt.Status.Update)
			assert.Equal(t, "succeeded", rt.Status.Update.State)
			assert.Contains(t, string(rt.Parameters), `"autoScalerMax":40`)

			d := b.Delete(bt.DeprovisionPath(id, bt.AWSHAPlanID))
			requireStatus(t, http.StatusAccepted, d)
			assert.Equal(t, "deprovisioning", runtimeOf(t, b, id).Status.State)
			b.WaitSucceeded(id, d.Operation())
			rt = runtimeOf(t, b, id)
			assert.Equal(t, "deprovisioned", rt.Status.State)
			assert.NotNil(t, rt.Status.DeletedAt)
			require.NotNil(t, rt.Status.Deprovisioning)
			assert.Equal(t, "succeeded", rt.Status.Deprovisioning.State)

			for _, op := range []string{d.Operation(), ""} {
				lo := b.Get(bt.LastOperationPath(id, op))
				requireStatus(t, http.StatusOK, lo)
				assert.Contains(t, string(lo.Body), `"state":"succeeded"`)
			}
			// The earlier operations stay readable too.
			lo := b.Get(bt.LastOperationPath(id, prov))
			requireStatus(t, http.StatusOK, lo)
			assert.Contains(t, string(lo.Body), `"state":"succeeded"`)
			requireStatus(t, http.StatusGone, b.Delete(bt.DeprovisionPath(id, bt.AWSHAPlanID)))
			assert.Len(t, b.Operations(id), 3)
		})
	}
}

// TestConcurrentIdenticalProvisioning: 100 identical PUTs at once create one operation.
func TestConcurrentIdenticalProvisioning(t *testing.T) {
	for name, start := range drivers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := start(t)
			b.Client.Transport.(*http.Transport).MaxIdleConnsPerHost = 100
			id := newID()
			body := bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-race"), bt.SAPContext("ga-race", "sa-race"))
			const n = 100
			var wg sync.WaitGroup
			responses := make([]bt.Response, n)
			release := make(chan struct{})
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-release
					responses[i] = b.Put(bt.InstancePath(id), body)
				}()
			}
			close(release)
			wg.Wait()

			ops := b.Operations(id)
			require.Len(t, ops, 1, "exactly one operation")
			for i, r := range responses {
				switch r.Status {
				case http.StatusAccepted:
					assert.Equal(t, ops[0].ID, r.Operation(), "response %d", i)
				case http.StatusOK: // only if the provisioning already finished
				default:
					t.Errorf("response %d: %s", i, r)
				}
			}
			page, err := b.Store.Instances().ListInstances(context.Background(), bt.InstanceFilter(id))
			require.NoError(t, err)
			assert.Equal(t, 1, page.TotalCount)
			b.WaitSucceeded(id, ops[0].ID)
			assert.Len(t, b.Operations(id), 1)
		})
	}
}

// parallel runs f n times at once and counts the answers by status.
func parallel(n int, f func() bt.Response) ([]bt.Response, map[int]int) {
	out := make([]bt.Response, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = f()
		}()
	}
	close(start)
	wg.Wait()
	counts := map[int]int{}
	for _, r := range out {
		counts[r.Status]++
	}
	return out, counts
}

// TestConcurrentMutations: the checks before a new operation (trial quota, no operation
// running, a running deprovisioning) hold when the requests arrive at once.
func TestConcurrentMutations(t *testing.T) {
	for name, start := range drivers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := start(t)
			const n = 20

			_, counts := parallel(n, func() bt.Response {
				return b.Put(bt.InstancePath(newID()), bt.ProvisionBody(bt.TrialPlanID, map[string]any{"name": "t"}, bt.SAPContext("ga-trial-race", "sa")))
			})
			assert.Equal(t, map[int]int{http.StatusAccepted: 1, http.StatusBadRequest: n - 1}, counts, "one trial per global account")

			id := newID()
			b.WaitSucceeded(id, b.Provision(id, "rt-patch-race", "ga-patch-race"))
			patches, counts := parallel(n, func() bt.Response {
				return b.Patch(bt.InstancePath(id), map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSHAPlanID})
			})
			// Updates are accepted one at a time: a repeat of the running one gets that operation
			// (202, OSB 2.17), the others find nothing to change once it has finished (200) or are
			// refused (422). A request that read the instance before the first update finished
			// may still start a second one after it: never two at once is the guarantee.
			started := map[string]bool{}
			for _, r := range patches {
				if r.Status == http.StatusAccepted {
					started[r.Operation()] = true
				}
			}
			accepted := len(started)
			assert.GreaterOrEqual(t, accepted, 1, "%v", counts)
			assert.Equal(t, n, counts[http.StatusAccepted]+counts[http.StatusUnprocessableEntity]+counts[http.StatusOK], "only 202, 422 or 200: %v", counts)
			var updates []storage.Operation
			for _, op := range b.Operations(id) {
				if op.Type == instance.TypeUpdate {
					b.WaitSucceeded(id, op.ID)
					updates = append(updates, op)
					assert.True(t, started[op.ID], "every stored update was answered 202 with its ID")
				}
			}
			// (That no two run at once is storagetest's InsertOperationExclusive race test.)
			require.Len(t, updates, accepted, "every accepted update is stored and succeeds")

			responses, counts := parallel(n, func() bt.Response { return b.Delete(bt.DeprovisionPath(id, bt.AWSHAPlanID)) })
			// Every request gets the one deprovisioning (202), or 410 once it has finished.
			assert.GreaterOrEqual(t, counts[http.StatusAccepted], 1, "%v", counts)
			assert.Equal(t, n, counts[http.StatusAccepted]+counts[http.StatusGone], "only 202 or 410: %v", counts)
			ops := b.Operations(id)
			require.Len(t, ops, 2+accepted, "one deprovisioning")
			for _, r := range responses {
				if r.Status == http.StatusAccepted {
					assert.Equal(t, ops[0].ID, r.Operation())
				}
			}
			b.WaitSucceeded(id, ops[0].ID)
		})
	}
}
