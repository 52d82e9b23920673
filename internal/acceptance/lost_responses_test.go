package acceptance

import (
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
)

// Every system loses 30% of its answers (the change happens, the client sees a 502): only
// idempotent creates survive that, and every stand-in holds exactly one object of each kind per
// runtime (one IAS client secret, one valid Director token), and none after deprovisioning.
func TestLostResponsesOnEverySystem(t *testing.T) {
	c := onDefaults(t)
	for _, sys := range allSystems {
		// AVS gives an evaluation's ID only in the creation's answer and cannot be searched by
		// name: a lost answer leaves an evaluation no client can find (the broker records its
		// name, see internal/clients/avs), so AVS is not part of this test.
		if sys != "avs" {
			c.faults[sys] = sandbox.Faults{LostResponseRate: 0.3}
		}
	}
	c.start()
	b := c.client()
	n := runtimesOf(t)

	start := time.Now()
	ids, ops := provisionMany(t, b, n, "lost")
	waitAll(t, b, ids, ops, 5*time.Minute)
	t.Logf("%d provisionings with 30%% lost responses: %s", n, time.Since(start).Round(time.Second))
	assertOnePerRuntime(t, readInventory(t, c.sandboxURL), n)

	start = time.Now()
	ops = deprovisionAll(t, b, ids)
	waitAll(t, b, ids, ops, 5*time.Minute)
	t.Logf("%d deprovisionings with 30%% lost responses: %s", n, time.Since(start).Round(time.Second))
	assertNothingLeft(t, readInventory(t, c.sandboxURL))
	for _, sys := range allSystems {
		t.Logf("%s: %+v", sys, stats(t, c.sandboxURL, sys))
	}
}
