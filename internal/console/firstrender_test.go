package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

const fleetSize = 10_000

// TestRuntimesPageWithTenThousandInstances opens the runtimes page over a fleet of 10,000
// instances (written straight to the store: the page reads only the API) and reports the
// time from navigation to the first frame that shows the table and the counts.
func TestRuntimesPageWithTenThousandInstances(t *testing.T) {
	b := bt.Start(t, bt.Options{NoEngine: true, NoSandbox: true})
	seedFleet(t, b.Store)
	br := newBrowser(t, b)

	// Polled on every animation frame: the value is the first frame's time after navigation.
	br.do(chromedp.Navigate(br.base + "#/runtimes"))
	firstRender, err := chromedp.Run(br.ctx, chromedp.Poll[float64](`document.querySelectorAll('table.runtimes tbody tr').length > 0 && document.querySelector('.summary') !== null && performance.now()`, chromedp.WithPollingTimeout(20*time.Second)))
	br.check(err, "waiting for the runtimes table")
	t.Logf("runtimes page with %d instances: first render after %.0f ms", fleetSize, firstRender)

	assert.Equal(t, 50, eval[int](br, `document.querySelectorAll('table.runtimes tbody tr').length`), "one page of 50")
	assert.Contains(t, br.text(`#runtimes-status`), fmt.Sprintf("%d runtimes; page 1 of %d", fleetSize, fleetSize/50))
	assert.Contains(t, br.text(`.summary`), fmt.Sprintf("%d live runtimes", fleetSize))
	br.screenshot("runtimes-10000")

	br.click(`//nav[@aria-label="Pages"]/button[normalize-space(.)="Next"]`)
	br.waitJS(`document.querySelector('#runtimes-status').textContent.includes('page 2 of')`)
}

func seedFleet(t *testing.T, store storage.Store) {
	ctx := context.Background()
	created := time.Now().Add(-time.Hour)
	plans := []string{bt.AWSPlanID, bt.AzurePlanID, bt.GCPPlanID}
	work := make(chan int)
	errs := make(chan error, fleetSize)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				errs <- seedOne(ctx, store, i, created, plans)
			}
		}()
	}
	for i := 0; i < fleetSize; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err, "seeding %d instances", fleetSize)
	}
}

func seedOne(ctx context.Context, store storage.Store, i int, created time.Time, plans []string) error {
	id := fmt.Sprintf("inst-%05d", i)
	inst := storage.Instance{
		InstanceID: id, RuntimeID: fmt.Sprintf("rt-%05d", i), GlobalAccountID: fmt.Sprintf("ga-%03d", i%500), SubAccountID: "sa-" + id,
		ServiceID: bt.ServiceID, PlanID: plans[i%3], ProviderRegion: "eu-central-1", CreatedAt: created.Add(time.Duration(i) * time.Millisecond),
		Parameters: json.RawMessage(`{"name":"` + id + `"}`),
	}
	op := storage.Operation{ID: "prov-" + id, InstanceID: id, Type: instance.TypeProvision, State: storage.StateSucceeded, CreatedAt: inst.CreatedAt, Deadline: inst.CreatedAt.Add(time.Hour)}
	if i%10 == 1 {
		op.State = storage.StateFailed
	}
	if _, _, err := store.Instances().InsertInstanceWithOperation(ctx, inst, op); err != nil {
		return fmt.Errorf("inserting instance %s: %w", id, err)
	}
	return nil
}
