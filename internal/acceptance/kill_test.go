package acceptance

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runtimesOf is the size of the many-runtime runs: issue 9's 100, or KEB_ACCEPTANCE_RUNTIMES
// for local experiments.
func runtimesOf(t *testing.T) int {
	n := 100
	if v := os.Getenv("KEB_ACCEPTANCE_RUNTIMES"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	return n
}

// The broker, on its defaults (SQLite, embedded sandbox) and on PostgreSQL, is killed with
// SIGKILL twice during 100 provisionings and once during their deprovisionings, and started
// again at once: every operation moves again within 5 s of each restart, every provisioning
// and deprovisioning succeeds, every stand-in holds exactly one object (one IAS client secret,
// one valid Director token) per runtime, and nothing is left behind.
func TestKill9DuringProvisioningAndDeprovisioning(t *testing.T) {
	for name, newBroker := range map[string]func(t *testing.T) *brokerProcess{
		"defaults": func(t *testing.T) *brokerProcess { return onDefaults(t) },
		"postgres": func(t *testing.T) *brokerProcess { return onPostgres(t, pgtest.NewDatabase(t)) },
	} {
		t.Run(name, func(t *testing.T) { killAndRestartRun(t, newBroker(t)) })
	}
}

func killAndRestartRun(t *testing.T, c *brokerProcess) {
	n := runtimesOf(t)
	c.start()
	b := c.client()

	start := time.Now()
	ids, ops := provisionMany(t, b, n, "kill")
	for range 2 {
		c.killWhenInFlight(n / 2)
		c.restartMeasured()
	}
	waitAll(t, b, ids, ops, 5*time.Minute)
	t.Logf("%d provisionings with 2 kills: %s", n, time.Since(start).Round(time.Second))
	inv, twice := withoutAVSKillWindow(t, readInventory(t, c.sandboxURL), 2*n)
	assertOnePerRuntime(t, inv, n)

	start = time.Now()
	ops = deprovisionAll(t, b, ids)
	c.killWhenInFlight(n / 2)
	c.restartMeasured()
	waitAll(t, b, ids, ops, 5*time.Minute)
	t.Logf("%d deprovisionings with 1 kill: %s", n, time.Since(start).Round(time.Second))
	assertNothingLeft(t, withoutAVSOrphans(t, readInventory(t, c.sandboxURL), twice))
	store := c.openStore()
	defer store.Close()
	for _, op := range ops {
		got, err := store.Operations().GetOperation(context.Background(), op)
		require.NoError(t, err)
		assert.Empty(t, got.Progress.ExecutedButNotCompleted, "operation %s gave up on a cleanup: %s", op, got.Description)
	}
}
