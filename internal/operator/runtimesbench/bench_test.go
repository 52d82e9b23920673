// Package runtimesbench measures GET /runtimes against a seeded database of 10,000 instances on
// both drivers (make bench-runtimes): every filter is answered by the database, so a filter
// costs the same order of time as one page of 100.
package runtimesbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kyma-project/kyma-environment-broker/internal/broker"
	"github.com/kyma-project/kyma-environment-broker/internal/catalog"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/lifecycle"
	"github.com/kyma-project/kyma-environment-broker/internal/operator"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/storagetest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const instances = 10_000

// Plan IDs of resources/plans.yaml.
var planIDs = []string{
	"361c511f-f939-4621-b228-d0fb79a1fe15", // aws
	"4deee563-e5ec-4731-b9b1-53b42d855f0c", // azure
	"ca6e5357-707f-4565-bbbd-b3ab732597c6", // gcp
	"7d55d31d-35ae-4438-bf13-6ffdfa107d9f", // trial
	"b1a5764e-2ea1-4f95-94c0-2b4538b37b55", // free
}

var regions = []string{"eu-central-1", "westeurope", "europe-west3", "us-east-1", "eastus"}

// seed writes the fleet: instance i has plan i%5, region i%5 (shifted), account i%500, and its
// newest operation decides the state: most are provisioned, some failed, provisioning,
// updating, upgrading, suspended (and expired) or deprovisioned.
func seed(b *testing.B, store storage.Store) {
	ctx := context.Background()
	start := time.Now().Add(-40 * 24 * time.Hour)
	work := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := seedOne(ctx, store, i, start); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := 0; i < instances; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

func seedOne(ctx context.Context, store storage.Store, i int, start time.Time) error {
	id := fmt.Sprintf("inst-%05d", i)
	created := start.Add(time.Duration(i) * 5 * time.Minute)
	inst := storage.Instance{
		InstanceID: id, RuntimeID: fmt.Sprintf("rt-%05d", i), GlobalAccountID: fmt.Sprintf("ga-%03d", i%500), SubAccountID: "sa-" + id,
		ServiceID: broker.ServiceID, PlanID: planIDs[i%5], ProviderRegion: regions[(i/5)%5], CreatedAt: created,
		Parameters: json.RawMessage(`{"name":"` + id + `"}`),
	}
	data, _ := json.Marshal(instance.ProvisioningData{PlanID: inst.PlanID, ShootName: fmt.Sprintf("c-%05d", i), KymaVersion: "2.20.0"})
	op := storage.Operation{ID: "prov-" + id, InstanceID: id, Type: instance.TypeProvision, State: storage.StateSucceeded, CreatedAt: created, Deadline: created.Add(time.Hour), Data: data}
	switch i % 20 {
	case 1:
		op.State = storage.StateFailed
	case 2:
		op.State = storage.StateInProgress
	}
	if _, _, err := store.Instances().InsertInstanceWithOperation(ctx, inst, op); err != nil {
		return err
	}
	next := map[int]struct {
		typ   string
		state storage.OperationState
	}{3: {instance.TypeUpdate, storage.StateInProgress}, 4: {instance.TypeUpgradeKyma, storage.StatePending},
		5: {instance.TypeSuspension, storage.StateSucceeded}, 6: {instance.TypeDeprovision, storage.StateSucceeded}}[i%20]
	if next.typ == "" {
		return nil
	}
	later := storage.Operation{ID: next.typ + "-" + id, InstanceID: id, Type: next.typ, State: next.state, CreatedAt: created.Add(time.Minute), Deadline: created.Add(time.Hour)}
	if _, err := store.Operations().InsertOperation(ctx, later); err != nil {
		return err
	}
	switch next.typ {
	case instance.TypeSuspension:
		_, err := store.Lifecycle().ExpireWithOperation(ctx, storage.Operation{InstanceID: id}, created.Add(time.Hour), nil)
		return err
	case instance.TypeDeprovision:
		_, err := storage.ModifyInstance(ctx, store.Instances(), id, func(in *storage.Instance) { at := created.Add(time.Hour); in.DeletedAt = &at })
		return err
	}
	return nil
}

var queries = []string{
	"page_size=100",
	"page_size=100&page=50",
	"account=ga-007",
	"subaccount=sa-inst-04242",
	"instance_id=inst-00042,inst-09999",
	"runtime_id=rt-01234",
	"region=us-east-1",
	"shoot=c-04321",
	"plan=trial",
	"state=failed",
	"state=suspended",
	"state=upgrading",
	"state=deprovisioned",
	"expired=true",
	"expires_within=72h",
	"state=provisioned&plan=aws&region=eu-central-1",
	"plan=gcp&op_detail=all",
	// Sorted (compare with page_size=100, the default order, in the same run): each sort column
	// is indexed with the instance ID (0041) except the derived state.
	"sort=created_at&order=desc",
	"sort=global_account_id",
	"sort=subaccount_id&order=desc&page=50",
	"sort=region&order=desc&plan=aws",
	"sort=plan&order=desc",
	"sort=runtime_id&state=failed",
	"sort=state",
	"sort=state&order=desc&page=50",
}

func BenchmarkRuntimes(b *testing.B) {
	for _, drv := range []string{driver.Postgres, driver.SQLite} {
		b.Run(drv, func(b *testing.B) {
			store := open(b, drv)
			began := time.Now()
			seed(b, store)
			b.Logf("%s: seeded %d instances in %s", drv, instances, time.Since(began).Round(time.Millisecond))
			catalog, err := catalog.FromConfig(catalog.Config{})
			if err != nil {
				b.Fatal(err)
			}
			log := logrus.New()
			log.SetOutput(io.Discard)
			x := lifecycle.Expirer{Store: store, ExpiryDays: lifecycle.ExpiryDays(catalog)}
			srv := httptest.NewServer(operator.New(store, broker.NewCatalog(catalog), log, operator.WithExpirer(x)))
			defer srv.Close()
			for _, q := range queries {
				b.Run(strings.ReplaceAll(q, "&", ","), func(b *testing.B) {
					var page struct {
						Count, TotalCount int
					}
					for i := 0; i < b.N; i++ {
						resp, err := srv.Client().Get(srv.URL + "/runtimes?" + q)
						if err != nil {
							b.Fatal(err)
						}
						body, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							b.Fatalf("%s: %d %s", q, resp.StatusCode, body)
						}
						if err := json.Unmarshal(body, &page); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(page.TotalCount), "matches")
					b.ReportMetric(float64(page.Count), "rows")
				})
			}
		})
	}
}

func open(b *testing.B, drv string) storage.Store {
	if drv == driver.SQLite {
		return storagetest.OpenSQLite(b)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	store, err := driver.Open(context.Background(), driver.Config{Driver: driver.Postgres, URL: pgtest.NewDatabase(b), SecretKey: strings.Repeat("k", 32), MaxOpenConns: 20}, log)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	return store
}
