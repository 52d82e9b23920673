package acceptance

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const outage = 20 * time.Second

// PostgreSQL stops for 20 s while provisionings run: meanwhile the broker answers 503 with
// Retry-After (which platforms retry), and once the database is back the same broker process
// finishes everything; nothing is lost or created twice.
func TestPostgresStoppedWhileOperationsRun(t *testing.T) {
	pg := pgtest.StartPrivate(t)
	c := onPostgres(t, pg.URL)
	c.start()
	pid := c.cmd.Process.Pid
	b := c.client()
	n := runtimesOf(t) / 2
	ids, ops := provisionMany(t, b, n, "outage")
	// Stop the database only once operations are observed in flight (a worker holds one, the
	// sandbox slowed so that they stay there), not after a request count.
	saved, held := c.holdInFlight(n)
	pg.Stop()
	t.Logf("PostgreSQL stopped with %d operations held", held)
	stopped := time.Now()
	late := uuid.NewString()
	lateBody := bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-late"), bt.SAPContext("ga-late", "sa-ga-late"))
	answers := map[int]int{}
	for time.Since(stopped) < outage {
		for _, r := range []bt.Response{
			b.Put(bt.InstancePath(late), lateBody),
			b.Get(bt.LastOperationPath(ids[0], ops[0])),
			b.Get("/runtimes"),
		} {
			answers[r.Status]++
			if assert.Equal(t, http.StatusServiceUnavailable, r.Status, r.String()) {
				assert.NotEmpty(t, r.Header.Get("Retry-After"), "a 503 says when to retry")
			}
		}
		time.Sleep(time.Second)
	}
	pg.Start()
	back := time.Now()
	t.Logf("PostgreSQL stopped for %s: answers by status %v", back.Sub(stopped).Round(time.Second), answers)

	// The platform retries the refused provisioning.
	r := b.Put(bt.InstancePath(late), lateBody)
	for time.Since(back) < time.Minute && r.Status == http.StatusServiceUnavailable {
		time.Sleep(time.Second)
		r = b.Put(bt.InstancePath(late), lateBody)
	}
	require.Equal(t, http.StatusAccepted, r.Status, r.String())
	c.restoreFaults(saved) // the database is back: the sandbox's faults are served again
	ids, ops = append(ids, late), append(ops, r.Operation())
	waitAll(t, b, ids, ops, 5*time.Minute)
	t.Logf("%d provisionings finished %s after PostgreSQL was back", len(ids), time.Since(back).Round(time.Second))
	assert.True(t, c.alive(pid), "the broker was not restarted")
	// An AVS creation whose answer was not saved before PostgreSQL stopped is made again, as
	// across a kill: AVS has no look-up by name. Bounded by the operations in flight.
	inv, _ := withoutAVSKillWindow(t, readInventory(t, c.sandboxURL), held)
	assertOnePerRuntime(t, inv, len(ids))
}
