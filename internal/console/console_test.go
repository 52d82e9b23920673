package console_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/externals"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/chromiumtest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

// browser is a headless Chromium tab that sends the harness's basic-auth credentials with
// every request, the way a browser does once the operator has logged in.
type browser struct {
	t         *testing.T
	ctx       context.Context
	base      string
	artifacts string
}

func newBrowser(t *testing.T, b *bt.Broker) *browser {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumtest.Path(t)), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(bt.Username+":"+bt.Password))
	_, err := chromedp.Call(ctx, network.Enable, network.EnableParams{})
	require.NoError(t, err, "starting Chromium")
	_, err = chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": auth}})
	require.NoError(t, err)
	// The browser is running: a timeout now bounds the test's actions, not the browser's start.
	ctx, cancelTimeout := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(cancelTimeout)
	dir := os.Getenv("KEB_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "artifacts")
	}
	dir = filepath.Join(dir, "console")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Logf("screenshots in %s", dir)
	return &browser{t: t, ctx: ctx, base: b.URL + "/console/", artifacts: dir}
}

// do runs actions, each wait bounded so that a failure leaves time to record the page.
func (br *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	br.t.Helper()
	ctx, cancel := context.WithTimeout(br.ctx, 60*time.Second)
	defer cancel()
	br.check(chromedp.Do(ctx, actions...), "running actions")
}

// check fails the test on err, with the page's text and a screenshot (failure.png) to see why.
func (br *browser) check(err error, what string) {
	br.t.Helper()
	if err == nil {
		return
	}
	body, _ := chromedp.Run(br.ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	if png, shotErr := chromedp.Run(br.ctx, chromedp.FullScreenshot(100)); shotErr == nil {
		_ = os.WriteFile(filepath.Join(br.artifacts, "failure.png"), png, 0o644)
	}
	br.t.Fatalf("%s: %v\npage: %s", what, err, body)
}

// open loads a console route (the part after #) and waits for the CSS selector sel.
func (br *browser) open(route, sel string) {
	br.t.Helper()
	br.do(chromedp.Navigate(br.base+"#"+route), chromedp.WaitVisible(chromedp.CSS(sel)))
}

func (br *browser) screenshot(name string) {
	br.t.Helper()
	png, err := chromedp.Run(br.ctx, chromedp.FullScreenshot(100))
	require.NoError(br.t, err)
	require.NoError(br.t, os.WriteFile(filepath.Join(br.artifacts, name+".png"), png, 0o644))
}

// waitJS polls a JavaScript condition until it holds (the page updates by polling the API).
func (br *browser) waitJS(cond string) {
	br.t.Helper()
	_, err := chromedp.Run(br.ctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(60*time.Second)))
	br.check(err, "waiting for "+cond)
}

func (br *browser) text(sel string) string {
	br.t.Helper()
	s, err := chromedp.Run(br.ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(br.t, err, "text of %s", sel)
	return s
}

// click clicks the element an XPath query names.
func (br *browser) click(xpath string) {
	br.t.Helper()
	br.do(chromedp.Click(xpath))
}

func eval[T any](br *browser, js string) T {
	br.t.Helper()
	v, err := chromedp.Run(br.ctx, chromedp.Evaluate[T](js))
	require.NoError(br.t, err, "evaluating %s", js)
	return v
}

func events(t *testing.T, b *bt.Broker, instanceID string) []runtime.Event {
	var out []runtime.Event
	r := b.Get("/events?instance_ids=" + instanceID)
	require.Equal(t, http.StatusOK, r.Status, r.String())
	r.JSON(t, &out)
	return out
}

// stepOrder is the order in which an operation's steps first appear in its events.
func stepOrder(evs []runtime.Event, operationID string) []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range evs {
		if e.OperationID == operationID && !seen[e.Step] {
			seen[e.Step] = true
			out = append(out, e.Step)
		}
	}
	return out
}

func upgrade(t *testing.T, b *bt.Broker, body map[string]any) string {
	r := b.Do(http.MethodPost, "/upgrade/kyma", body)
	require.Equal(t, http.StatusAccepted, r.Status, r.String())
	var out struct {
		OrchestrationID string `json:"orchestrationID"`
	}
	r.JSON(t, &out)
	return out.OrchestrationID
}

// TestConsole drives the console in headless Chromium against a broker with real
// provisionings (engine, embedded provisioner, sandboxed external systems).
func TestConsole(t *testing.T) {
	b := bt.Start(t, bt.Options{Externals: func(c *externals.Config) {
		// An outage outlasts the steps' retry window within the test.
		c.Settings.CallTimeout, c.Settings.RetryTime, c.Settings.CleanupRetryTime = time.Second, 2*time.Second, 2*time.Second
	}})
	accounts := []string{"ga-alpha", "ga-beta", "ga-gamma"}
	ids := make([]string, len(accounts))
	ops := make([]string, len(accounts))
	for i, ga := range accounts {
		ids[i] = uuid.NewString()
		ops[i] = b.Provision(ids[i], "rt-"+ga, ga)
	}
	for i := range ids {
		b.WaitSucceeded(ids[i], ops[i])
	}
	require.NoError(t, b.Sandbox.SetFaults("edp", sandbox.Faults{OutageUntil: time.Now().Add(time.Hour)}))
	failedID := uuid.NewString()
	failedOp := b.Provision(failedID, "rt-broken", "ga-broken")
	lo := b.WaitForLastOperation(failedID, failedOp, 30*time.Second)
	require.Equal(t, "failed", string(lo.State), lo.Description)
	require.NoError(t, b.Sandbox.SetFaults("edp", sandbox.Faults{}))

	br := newBrowser(t, b)

	t.Run("the runtimes table lists and filters the runtimes", func(t *testing.T) {
		br.t = t
		br.open("/runtimes", `table.runtimes tbody tr`)
		br.waitJS(`document.querySelectorAll('table.runtimes tbody tr').length === 4 && document.querySelector('.summary') !== null`)
		listed := eval[[]string](br, `[...document.querySelectorAll('table.runtimes tbody tr')].map(r => r.dataset.instance)`)
		assert.ElementsMatch(t, append([]string{failedID}, ids...), listed)
		assert.Contains(t, br.text(`.summary`), "4 live runtimes")
		br.screenshot("runtimes")

		br.do(chromedp.SendKeys(chromedp.CSS(`#f-account`), "ga-beta"), chromedp.Click(chromedp.CSS(`form.filters button[type=submit]`)))
		br.waitJS(`location.hash.includes('account=ga-beta') && document.querySelectorAll('table.runtimes tbody tr').length === 1`)
		listed = eval[[]string](br, `[...document.querySelectorAll('table.runtimes tbody tr')].map(r => r.dataset.instance)`)
		assert.Equal(t, []string{ids[1]}, listed)

		br.open("/runtimes?state=failed", `table.runtimes tbody tr`)
		br.waitJS(`document.querySelectorAll('table.runtimes tbody tr').length === 1 && document.querySelector('table.runtimes tbody tr').dataset.instance === '` + failedID + `'`)

		br.open("/runtimes?id="+ids[2], `table.runtimes tbody tr`)
		br.waitJS(`document.querySelectorAll('table.runtimes tbody tr').length === 1 && document.querySelector('table.runtimes tbody tr').dataset.instance === '` + ids[2] + `'`)

		// Sorting by account, both ways, through the API: with two rows a page, page 1 holds the
		// first two accounts of the whole list, not of whatever page was shown.
		br.open("/runtimes?page_size=2", `table.runtimes tbody tr`)
		br.waitJS(`document.querySelectorAll('table.runtimes tbody tr').length === 2`)
		assert.Equal(t, "descending", eval[string](br, `document.querySelector('th[data-sort=created_at]').getAttribute('aria-sort')`), "newest first by default")
		const accountColumn = `[...document.querySelectorAll('table.runtimes tbody td[data-label=Account]')].map(c => c.textContent).join(',')`
		const sortRequests = `performance.getEntriesByType('resource').map(e => e.name).filter(n => n.includes('/runtimes?') && n.includes('sort=global_account_id'))`
		br.click(`//th[.//text()="Account"]/button`)
		br.waitJS(accountColumn + ` === 'ga-alpha,ga-beta' && document.querySelector('th[data-sort=global_account_id]').getAttribute('aria-sort') === 'ascending'`)
		asked := eval[[]string](br, sortRequests)
		require.NotEmpty(t, asked, "the sort is the API's")
		assert.Contains(t, asked[len(asked)-1], "order=asc")
		assert.Equal(t, "none", eval[string](br, `document.querySelector('th[data-sort=created_at]').getAttribute('aria-sort')`))
		// Keyboard: focus the header's button and press Enter.
		br.do(chromedp.Focus(`//th[.//text()="Account"]/button`), chromedp.KeyEvent("\r"))
		br.waitJS(accountColumn + ` === 'ga-gamma,ga-broken' && document.querySelector('th[data-sort=global_account_id]').getAttribute('aria-sort') === 'descending'`)
		asked = eval[[]string](br, sortRequests)
		assert.Contains(t, asked[len(asked)-1], "order=desc")
		br.click(`//nav[@aria-label="Pages"]/button[normalize-space(.)="Next"]`)
		br.waitJS(accountColumn + ` === 'ga-beta,ga-alpha'`)
		br.screenshot("runtimes-sorted")

		br.do(chromedp.EmulateViewport(390, 844))
		br.open("/runtimes", `table.runtimes tbody tr`)
		br.screenshot("runtimes-phone")
		br.do(chromedp.EmulateViewport(1280, 900))
	})

	t.Run("an instance page shows the step timeline in the engine's order", func(t *testing.T) {
		br.t = t
		br.open("/instances/"+ids[0], `.operation .step`)
		want := stepOrder(events(t, b, ids[0]), ops[0])
		require.NotEmpty(t, want)
		got := eval[[]string](br, `[...document.querySelectorAll('.operation[data-operation="`+ops[0]+`"] .step')].map(s => s.dataset.step)`)
		assert.Equal(t, want, got, "one row per step, in seed 001's order as the engine ran it")
		bars := eval[int](br, `document.querySelectorAll('.operation[data-operation="`+ops[0]+`"] .bar.succeeded').length`)
		failed := eval[int](br, `document.querySelectorAll('.step.failed').length`)
		assert.GreaterOrEqual(t, bars, len(want)-countSkipped(events(t, b, ids[0]), ops[0]), "a bar per step run")
		assert.Zero(t, failed)
		text := br.text(`main`)
		var rt struct {
			Data []runtime.DTO `json:"data"`
		}
		b.Get("/runtimes?instance_id="+ids[0]).JSON(t, &rt)
		require.Len(t, rt.Data, 1)
		require.NotEmpty(t, rt.Data[0].DashboardURL)
		assert.Contains(t, text, rt.Data[0].DashboardURL)
		assert.Contains(t, text, "rt-ga-alpha", "the parameters are shown")
		// The Runtime Agent's connection, as GET /runtimes?connection_status=true has it.
		br.waitJS(`document.querySelector('.agent-connection [data-status]')?.dataset.status === 'Connected'`)

		// Each step sits in the band of its stage, as its events name it.
		stageOf := map[string]string{}
		for _, e := range events(t, b, ids[0]) {
			if e.OperationID == ops[0] && e.Step != "" {
				require.NotEmpty(t, e.Stage, "event of %s names its stage", e.Step)
				stageOf[e.Step] = e.Stage
			}
		}
		shown := eval[map[string]string](br, `Object.fromEntries([...document.querySelectorAll('.operation[data-operation="`+ops[0]+`"] .stage .step')].map(s => [s.dataset.step, s.closest('.stage').dataset.stage]))`)
		assert.Equal(t, stageOf, shown)
		labels := eval[[]string](br, `[...document.querySelectorAll('.operation[data-operation="`+ops[0]+`"] .stage-name')].map(s => s.textContent)`)
		assert.Contains(t, labels, "Stage "+stageOf["Create_Runtime"])
		br.screenshot("instance-timeline")
	})

	t.Run("a failing operation shows the failing step and its message", func(t *testing.T) {
		br.t = t
		br.open("/instances/"+failedID, `.step.failed`)
		var failedEvent runtime.Event
		for _, e := range events(t, b, failedID) {
			if e.Type == "failed" {
				failedEvent = e
			}
		}
		require.NotEmpty(t, failedEvent.Step)
		step := eval[string](br, `document.querySelector('.step.failed').dataset.step`)
		message := br.text(`.step.failed .step-message.failure`)
		assert.Equal(t, "EDP_Registration", step)
		assert.Equal(t, failedEvent.Step, step)
		assert.Contains(t, message, failedEvent.Message)
		br.screenshot("instance-failed")
	})

	t.Run("an orchestration's progress reaches 100%", func(t *testing.T) {
		br.t = t
		include := make([]map[string]any, 0, len(ids))
		for _, id := range ids {
			include = append(include, map[string]any{"instanceID": id})
		}
		id := upgrade(t, b, map[string]any{"targets": map[string]any{"include": include},
			"strategy": map[string]any{"parallel": map[string]any{"workers": 3}}, "kyma": map[string]any{"version": "2.21.0"}})
		br.open("/orchestrations/"+id, `.orch-progress .pct`)
		br.waitJS(`document.querySelector('.orch-progress .pct').textContent === '100%' && document.querySelector('h1 .badge').textContent === 'succeeded'`)
		assert.Equal(t, "100", eval[string](br, `document.querySelector('.orch-progress [role=progressbar]').getAttribute('aria-valuenow')`))
		br.screenshot("orchestration")
		br.open("/orchestrations", `tr[data-orchestration="`+id+`"]`)
		br.screenshot("orchestrations")
	})

	t.Run("cancel works after confirmation", func(t *testing.T) {
		br.t = t
		id := upgrade(t, b, map[string]any{"targets": map[string]any{"include": []map[string]any{{"target": "all"}}},
			"strategy": map[string]any{"schedule": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, "kyma": map[string]any{"version": "2.22.0"}})
		br.open("/orchestrations/"+id, `.actions button`)
		br.click(`//div[@class="actions"]//button[normalize-space(.)="Cancel"]`)
		br.waitJS(`document.querySelector('.confirm') !== null`)
		br.screenshot("orchestration-cancel-confirm")
		br.click(`//span[@class="confirm"]//button[normalize-space(.)="Yes, cancel"]`)
		br.waitJS(`document.querySelector('h1 .badge').textContent === 'canceled'`)
		var o struct {
			State string `json:"state"`
		}
		b.Get("/orchestrations/"+id).JSON(t, &o)
		assert.Equal(t, "canceled", o.State)
	})

	t.Run("the events feed shows the fleet, filters and updates live", func(t *testing.T) {
		br.t = t
		br.open("/events?instance="+failedID+"&type=failed", `.feed li`)
		assert.Equal(t, 1, eval[int](br, `document.querySelectorAll('.feed li').length`))
		assert.Contains(t, br.text(`.feed`), "EDP_Registration")

		br.open("/events", `.feed li`)
		const instances = `new Set([...document.querySelectorAll('.feed li')].map(l => l.dataset.instance))`
		br.waitJS(instances + `.size >= 2`)
		ids := eval[[]int](br, `[...document.querySelectorAll('.feed li')].map(l => Number(l.dataset.event))`)
		for i := 1; i < len(ids); i++ {
			require.Greater(t, ids[i-1], ids[i], "newest first")
		}
		br.screenshot("events")

		// Filtered by type from the form: every instance's failures, nothing else.
		eval[bool](br, `(() => { const s = document.querySelector('#f-type'); s.value = 'failed'; return s.dispatchEvent(new Event('change', {bubbles: true})); })()`)
		br.do(chromedp.Click(chromedp.CSS(`form.filters button[type=submit]`)))
		br.waitJS(`location.hash.includes('type=failed') && document.querySelectorAll('.feed li').length > 0 && [...document.querySelectorAll('.feed li')].every(l => l.classList.contains('failed'))`)
		assert.Contains(t, eval[[]string](br, `[...`+instances+`]`), failedID)

		// Live: a new provisioning's events appear without reloading.
		br.open("/events", `.feed li`)
		id := uuid.NewString()
		op := b.Provision(id, "rt-live", "ga-live")
		br.waitJS(`document.querySelector('.feed li[data-instance="` + id + `"]') !== null`)
		// Its outcome is not this test's (EDP's circuit may still be open from the outage above).
		b.WaitForLastOperation(id, op, 30*time.Second)
	})
}

func countSkipped(evs []runtime.Event, operationID string) int {
	n := 0
	for _, e := range evs {
		if e.OperationID == operationID && e.Type == "skipped" {
			n++
		}
	}
	return n
}

const fleetSize = 10_000

// TestRuntimesPageWithTenThousandInstances opens the runtimes page over a fleet of 10,000
// instances (written straight to the store: the page reads only the API), on SQLite and on
// PostgreSQL, and reports the time from navigation to the first frame that shows the table and
// the counts, beside the same page over an empty fleet in the same run (the reference: what
// the browser and the broker take without data).
func TestRuntimesPageWithTenThousandInstances(t *testing.T) {
	for _, db := range []struct{ name, url string }{{"sqlite", ""}, {"postgres", "new"}} {
		t.Run(db.name, func(t *testing.T) {
			opts := bt.Options{NoEngine: true, NoSandbox: true}
			if db.url != "" {
				opts.DatabaseURL = pgtest.NewDatabase(t)
			}
			b := bt.Start(t, opts)
			br := newBrowser(t, b)
			const ready = `document.querySelector('.summary') !== null && document.querySelector('#runtimes-status').textContent.includes('runtimes; page')`
			empty := firstRender(br, ready)
			seedFleet(t, b.Store)
			full := firstRender(br, ready+` && document.querySelectorAll('table.runtimes tbody tr').length > 0`)
			t.Logf("runtimes page on %s: first render with %d instances after %.0f ms (empty fleet: %.0f ms)", db.name, fleetSize, full, empty)

			assert.Equal(t, 50, eval[int](br, `document.querySelectorAll('table.runtimes tbody tr').length`), "one page of 50")
			assert.Contains(t, br.text(`#runtimes-status`), fmt.Sprintf("%d runtimes; page 1 of %d", fleetSize, fleetSize/50))
			assert.Contains(t, br.text(`.summary`), fmt.Sprintf("%d live runtimes", fleetSize))
			assert.Equal(t, fmt.Sprintf("inst-%05d", fleetSize-1), eval[string](br, `document.querySelector('table.runtimes tbody tr').dataset.instance`), "newest first")
			br.screenshot("runtimes-10000-" + db.name)

			br.click(`//nav[@aria-label="Pages"]/button[normalize-space(.)="Next"]`)
			br.waitJS(`document.querySelector('#runtimes-status').textContent.includes('page 2 of')`)
			// A sort over the whole fleet answers as fast as the default order (indexed).
			br.click(`//th[.//text()="Subaccount"]/button`)
			br.waitJS(`document.querySelector('table.runtimes tbody tr').dataset.instance === 'inst-00000'`)
		})
	}
}

// firstRender navigates to the runtimes page and returns the time (ms) from navigation to the
// first animation frame on which cond holds.
func firstRender(br *browser, cond string) float64 {
	br.t.Helper()
	br.do(chromedp.Navigate(br.base + "#/runtimes"))
	br.do(chromedp.Reload())
	ms, err := chromedp.Run(br.ctx, chromedp.Poll[float64](cond+` && performance.now()`, chromedp.WithPollingTimeout(60*time.Second)))
	br.check(err, "waiting for the runtimes page")
	return ms
}

func seedFleet(t *testing.T, store storage.Store) {
	ctx := context.Background()
	created := time.Now().Add(-time.Hour)
	plans := []string{bt.AWSPlanID, bt.AzurePlanID, bt.GCPPlanID}
	// Eight writers, each taking every eighth instance; the first error of each is kept.
	const writers = 8
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < fleetSize && errs[w] == nil; i += writers {
				errs[w] = seedOne(ctx, store, i, created, plans)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
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
