package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/common/orchestration"
	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// refreshMS is the runtimes list's refresh interval (app.js REFRESH_MS).
const refreshMS = 5000

// TestConsoleOperatorTraps checks the console's side of issue #37's operator traps 5, 7 and 8
// against a broker without an engine: the fleet, a provisioner operation stuck retrying and
// dry-run orchestrations are written through the store and the operator API, and stay as
// written while the browser looks at them.
func TestConsoleOperatorTraps(t *testing.T) {
	ctx := context.Background()
	b := bt.Start(t, bt.Options{NoEngine: true, NoSandbox: true})
	created := time.Now().Add(-time.Hour)
	for i := range 5 {
		require.NoError(t, seedOne(ctx, b.Store, i, created, []string{bt.AWSPlanID, bt.AWSPlanID, bt.AWSPlanID}))
	}
	br := newBrowser(t, b)

	t.Run("trap 5: a provisioner's retries name the runtime, link the instance, collapse and say when", func(t *testing.T) {
		br.t = t
		// The embedded provisioner's operation records the runtime as its instance; its step
		// waits for the cluster and retries, with a long interval (an open circuit's hold).
		const inst, rt, opID, step = "inst-00002", "rt-00002", "prov-op-stuck", "Wait_For_Cluster_Creation"
		now := time.Now().UTC().Truncate(time.Second)
		givesUp := now.Add(47 * time.Minute)
		_, err := b.Store.Operations().InsertOperation(ctx, storage.Operation{ID: opID, InstanceID: rt, Type: instance.TypeProvision,
			State: storage.StateInProgress, CreatedAt: now.Add(-10 * time.Minute), Deadline: now.Add(time.Hour),
			Progress: storage.Progress{Steps: map[string]storage.StepProgress{step: {FirstAttempt: now.Add(-9 * time.Minute), Attempts: 6, GivesUpAt: givesUp}}}})
		require.NoError(t, err)
		evs := []storage.Event{{OperationID: opID, InstanceID: rt, Step: step, Stage: "create_cluster", Type: storage.EventStarted, CreatedAt: now.Add(-9 * time.Minute)}}
		const retries = 6
		for i := range retries {
			evs = append(evs, storage.Event{OperationID: opID, InstanceID: rt, Step: step, Stage: "create_cluster", Type: storage.EventRetrying,
				Message: fmt.Sprintf("cluster not ready (check %d)", i+1), Wait: 10 * time.Minute, CreatedAt: now.Add(-3*time.Minute + time.Duration(i)*10*time.Second)})
		}
		// Another instance's event after them: the stuck one is not simply the newest.
		evs = append(evs, storage.Event{OperationID: "prov-inst-00003", InstanceID: "inst-00003", Step: "Create_Runtime", Stage: "create_runtime",
			Type: storage.EventSucceeded, CreatedAt: now})
		require.NoError(t, b.Store.Events().InsertEvents(ctx, evs...))

		// What the API says about the entry (the facts the page must show).
		var feed []runtime.Event
		r := b.Get("/events?collapse=true&page_size=100")
		require.Equal(t, http.StatusOK, r.Status, r.String())
		r.JSON(t, &feed)
		var entry runtime.Event
		for _, e := range feed {
			if e.OperationID == opID && e.Type == "retrying" {
				entry = e
			}
		}
		require.Equal(t, retries, entry.Repeats, "the API collapses the retries")
		require.Equal(t, inst, entry.InstanceID)
		require.Equal(t, rt, entry.RuntimeID)
		require.NotNil(t, entry.NextTryAt)
		require.NotNil(t, entry.GivesUpAt)

		br.open("/events", `.feed li`)
		sel := `.feed li.retrying[data-event="` + fmt.Sprint(entry.ID) + `"]`
		br.waitJS(`document.querySelector('` + sel + `') !== null`)
		assert.Equal(t, 1, eval[int](br, `document.querySelectorAll('.feed li.retrying').length`), "one entry for the step's retries")
		text := br.text(sel)
		assert.Contains(t, text, fmt.Sprintf("×%d", retries))
		assert.Contains(t, text, rt, "the runtime ID is shown")
		assert.Equal(t, rt, eval[string](br, `document.querySelector('`+sel+` .runtime-id').textContent`))
		// The newest retry was 2 min 10 s before the seed with a 10 min wait: the next try is in under 8 min,
		// not "in 10 min" (the interval as if it had just been recorded).
		assert.Regexp(t, `next try in [5-7] min \d+ s`, text, "the real next try (the API's next_try_at)")
		assert.NotContains(t, text, "next try in 10 min")
		assert.Contains(t, text, "gives up at "+givesUp.Format("15:04:05"))
		assert.Contains(t, text, entry.Message)
		assert.Contains(t, eval[[]string](br, `[...document.querySelectorAll('.feed li')].map(l => l.dataset.instance)`), "inst-00003", "the rest of the fleet stays in the feed")
		href := eval[string](br, `document.querySelector('`+sel+` a.instance-link').getAttribute('href')`)
		assert.Equal(t, "#/instances/"+inst, href, "the link names the instance, never the runtime")
		br.screenshot("events-provisioner-retries")

		// Live: two more retries of the step join the entry rather than push the fleet down.
		more := time.Now().UTC()
		require.NoError(t, b.Store.Events().InsertEvents(ctx,
			storage.Event{OperationID: opID, InstanceID: rt, Step: step, Stage: "create_cluster", Type: storage.EventRetrying, Message: "cluster not ready (check 7)", Wait: 10 * time.Minute, CreatedAt: more},
			storage.Event{OperationID: opID, InstanceID: rt, Step: step, Stage: "create_cluster", Type: storage.EventRetrying, Message: "cluster not ready (check 8)", Wait: 10 * time.Minute, CreatedAt: more}))
		br.waitJS(fmt.Sprintf(`(() => { const l = [...document.querySelectorAll('.feed li.retrying')]; return l.length === 1 && l[0].dataset.repeats === '%d' && l[0].textContent.includes('×%d') && l[0].textContent.includes('check 8'); })()`, retries+2, retries+2))
		assert.Contains(t, br.text(`.feed li.retrying`), rt)

		br.do(chromedp.Click(chromedp.CSS(`.feed li.retrying a.instance-link`)))
		br.waitJS(`location.hash === '#/instances/` + inst + `' && document.querySelector('.cards') !== null`)
		assert.NotContains(t, br.text(`main`), "No such instance")
		assert.Contains(t, br.text(`main`), rt)
	})

	var dryRunID string
	t.Run("trap 7: a dry run is shown as one, with the runtimes it would touch", func(t *testing.T) {
		br.t = t
		dryRunID = upgrade(t, b, map[string]any{"targets": map[string]any{"include": []map[string]any{{"target": "all"}}},
			"kyma": map[string]any{"version": "2.21.0"}, "dryRun": true})
		var ops orchestration.OperationResponseList
		b.Get("/orchestrations/"+dryRunID+"/operations?page_size=1000").JSON(t, &ops)
		require.GreaterOrEqual(t, len(ops.Data), 3, "the fleet's runtimes are selected")
		var want []string
		for _, op := range ops.Data {
			require.True(t, op.DryRun)
			want = append(want, op.RuntimeID)
		}

		br.open("/orchestrations/"+dryRunID, `h1 .badge`)
		br.waitJS(`document.querySelector('h1 .badge.dry-run')?.textContent === 'dry run' && document.querySelectorAll('tr[data-runtime]').length === ` + fmt.Sprint(len(want)))
		main := br.text(`main`)
		assert.NotContains(t, main, "100%")
		assert.Zero(t, eval[int](br, `document.querySelectorAll('[role=progressbar]').length`), "no progress of an upgrade that does not happen")
		assert.Contains(t, main, "Dry run: nothing was upgraded")
		assert.ElementsMatch(t, want, eval[[]string](br, `[...document.querySelectorAll('tr[data-runtime]')].map(r => r.dataset.runtime)`))
		for _, id := range want {
			assert.Contains(t, main, id)
		}
		br.screenshot("orchestration-dry-run")

		br.open("/orchestrations", `tr[data-orchestration="`+dryRunID+`"]`)
		row := `tr[data-orchestration="` + dryRunID + `"]`
		assert.Equal(t, "dry run", eval[string](br, `document.querySelector('`+row+` .badge').textContent`))
		assert.NotContains(t, br.text(row), "100%")
		assert.NotContains(t, br.text(row), "succeeded")
	})

	t.Run("trap 8: orchestrations and their operations are paged, with a notice", func(t *testing.T) {
		br.t = t
		require.NotEmpty(t, dryRunID)
		for i := range 4 {
			upgrade(t, b, map[string]any{"targets": map[string]any{"include": []map[string]any{{"target": "all"}}},
				"kyma": map[string]any{"version": fmt.Sprintf("2.2%d.0", i+2)}, "dryRun": true})
		}
		var all orchestration.StatusResponseList
		b.Get("/orchestrations?page_size=2&page=2").JSON(t, &all)
		require.Equal(t, 5, all.TotalCount)
		var page2 []string
		for _, o := range all.Data {
			page2 = append(page2, o.OrchestrationID)
		}

		const rows = `[...document.querySelectorAll('tr[data-orchestration]')].map(r => r.dataset.orchestration)`
		br.open("/orchestrations?page_size=2", `tr[data-orchestration]`)
		br.waitJS(`document.querySelector('.page-notice')?.textContent.startsWith('Showing 1–2 of 5') && document.querySelectorAll('tr[data-orchestration]').length === 2`)
		first := eval[[]string](br, rows)
		br.click(`//nav[@aria-label="Pages"]/button[normalize-space(.)="Next"]`)
		br.waitJS(`document.querySelector('.page-notice')?.textContent.startsWith('Showing 3–4 of 5')`)
		assert.Equal(t, page2, eval[[]string](br, rows), "page 2 is the API's page 2")
		assert.NotContains(t, first, page2[0])
		assert.True(t, strings.Contains(eval[string](br, `location.hash`), "page=2"))
		br.screenshot("orchestrations-paged")

		// The operations of one orchestration, two a page.
		var ops orchestration.OperationResponseList
		b.Get("/orchestrations/"+dryRunID+"/operations?page_size=2&page=2").JSON(t, &ops)
		require.Greater(t, ops.TotalCount, 2)
		br.open("/orchestrations/"+dryRunID+"?page_size=2", `tr[data-runtime]`)
		br.waitJS(fmt.Sprintf(`document.querySelector('.page-notice')?.textContent.startsWith('Showing 1–2 of %d')`, ops.TotalCount))
		br.click(`//nav[@aria-label="Pages of operations"]/button[normalize-space(.)="Next"]`)
		br.waitJS(fmt.Sprintf(`document.querySelector('.page-notice')?.textContent.startsWith('Showing 3–%d of %d')`, 2+len(ops.Data), ops.TotalCount))
		var want []string
		for _, op := range ops.Data {
			want = append(want, op.RuntimeID)
		}
		assert.Equal(t, want, eval[[]string](br, `[...document.querySelectorAll('tr[data-runtime]')].map(r => r.dataset.runtime)`))
	})

	t.Run("trap 8: the runtimes list refreshes by itself, not while the filter is edited", func(t *testing.T) {
		br.t = t
		const row = `document.querySelector('table.runtimes tbody tr[data-instance="%s"]') !== null`
		// readsSince is a script counting the list's requests started after at (performance.now()).
		readsSince := func(at float64) string {
			return fmt.Sprintf(`performance.getEntriesByType('resource').filter(e => /\/runtimes\?/.test(e.name) && e.startTime > %f).length`, at)
		}
		br.open("/runtimes", `table.runtimes tbody tr`)
		eval[bool](br, `performance.setResourceTimingBufferSize(100000), true`)
		br.waitJS(`document.querySelectorAll('table.runtimes tbody tr').length === 5`)

		// Provisioned after the page loaded: it shows up without a reload.
		later := uuid.NewString()
		b.Provision(later, "rt-later", "ga-later")
		br.waitJS(fmt.Sprintf(row, later))

		// The operator puts the cursor into a filter field: the list holds still.
		br.do(chromedp.Focus(chromedp.CSS(`#f-account`)))
		br.waitJS(`document.querySelector('.refresh').dataset.paused === 'true'`)
		// Requests started from now on (one already under way when the focus came may still end).
		pausedAt := eval[float64](br, `performance.now()`)
		reads := readsSince(pausedAt)
		held := uuid.NewString()
		b.Provision(held, "rt-held", "ga-held")
		// Absence is only seen over time: two and a half refresh intervals pass.
		br.waitJS(fmt.Sprintf(`performance.now() > %f`, pausedAt+2.5*refreshMS))
		assert.Zero(t, eval[int](br, reads), "no refresh while the filter field has focus")
		assert.False(t, eval[bool](br, fmt.Sprintf(row, held)))
		// Typing keeps it paused, and the typed text stays as typed.
		br.do(chromedp.SendKeys(chromedp.CSS(`#f-account`), "ga-"))
		assert.Equal(t, "ga-", eval[string](br, `document.querySelector('#f-account').value`))
		assert.Equal(t, "true", eval[string](br, `document.querySelector('.refresh').dataset.paused`))
		assert.Zero(t, eval[int](br, reads), "no refresh while the filter is typed in")
		br.screenshot("runtimes-refresh-paused")

		// Clear drops the edit and moves the focus away: refreshing resumes.
		br.click(`//form[@aria-label="Filter runtimes"]//button[normalize-space(.)="Clear"]`)
		br.waitJS(`document.querySelector('.refresh').dataset.paused === 'false'`)
		br.waitJS(fmt.Sprintf(row, held))
		assert.Positive(t, eval[int](br, reads))

		// A hidden tab does not poll (the page sees document.hidden as a browser sets it when the
		// tab goes to the background); shown again, it refreshes at once.
		eval[bool](br, `Object.defineProperty(document, 'hidden', { configurable: true, get: () => true }), document.dispatchEvent(new Event('visibilitychange'))`)
		hiddenAt := eval[float64](br, `performance.now()`)
		unseen := uuid.NewString()
		b.Provision(unseen, "rt-unseen", "ga-unseen")
		br.waitJS(fmt.Sprintf(`performance.now() > %f`, hiddenAt+2.5*refreshMS))
		assert.Zero(t, eval[int](br, readsSince(hiddenAt)), "no refresh while the tab is hidden")
		assert.False(t, eval[bool](br, fmt.Sprintf(row, unseen)))
		// The time is taken before the event: its handler starts the request synchronously.
		shownAt := eval[float64](br, `(() => { const at = performance.now(); delete document.hidden; document.dispatchEvent(new Event('visibilitychange')); return at; })()`)
		br.waitJS(fmt.Sprintf(row, unseen))
		first := eval[float64](br, fmt.Sprintf(`Math.min(1e12, ...performance.getEntriesByType('resource').filter(e => /\/runtimes\?/.test(e.name) && e.startTime > %f).map(e => e.startTime))`, shownAt))
		assert.Less(t, first-shownAt, float64(refreshMS)/2, "shown again, the list refreshes at once, not at the next tick")
	})
}
