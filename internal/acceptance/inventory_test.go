package acceptance

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/avsstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/azurestandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/directorstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/edpstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/iasstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/reconcilerstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/smstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// inventory is what exists in every system, read over the sandbox's inspection endpoints.
type inventory struct {
	AVS        avsstandin.Objects
	EDP        edpstandin.Objects
	IAS        iasstandin.Objects
	SM         smstandin.Objects
	Azure      azurestandin.Objects
	Reconciler reconcilerstandin.Objects
	Director   directorstandin.Objects
	// Tokens are the Director's one-time tokens still valid, per runtime (validTokens of its
	// objects; nil where the stand-in does not report them).
	Tokens map[string]*int
}

// directorTokens is the part of the Director's objects that says which one-time tokens are valid.
type directorTokens struct {
	Tenants map[string][]struct {
		ID          string `json:"id"`
		ValidTokens *int   `json:"validTokens"`
	} `json:"tenants"`
}

func readInventory(t testing.TB, sandboxURL string) inventory {
	t.Helper()
	var inv inventory
	for sys, into := range map[string]any{
		"avs": &inv.AVS, "edp": &inv.EDP, "ias": &inv.IAS, "servicemanager": &inv.SM, "azure": &inv.Azure,
		"reconciler": &inv.Reconciler, "director": &inv.Director,
	} {
		resp, err := http.Get(sandboxURL + "/_sandbox/" + sys + "/objects")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, sys)
		require.NoError(t, json.Unmarshal(body, into), sys)
		if sys == "director" {
			var tokens directorTokens
			require.NoError(t, json.Unmarshal(body, &tokens))
			inv.Tokens = map[string]*int{}
			for _, rts := range tokens.Tenants {
				for _, rt := range rts {
					inv.Tokens[rt.ID] = rt.ValidTokens
				}
			}
		}
	}
	return inv
}

// evaluations are the AVS evaluations other than the configured parents.
func (inv inventory) evaluations() []avsstandin.Object {
	var out []avsstandin.Object
	for _, e := range inv.AVS.Evaluations {
		if e.ID != standins.AVSParentID {
			out = append(out, e)
		}
	}
	return out
}

// liveClusters are the reconciler's clusters not deleted.
func (inv inventory) liveClusters() []reconcilerstandin.Object {
	var out []reconcilerstandin.Object
	for _, c := range inv.Reconciler.Clusters {
		if c.Status != reconcilerstandin.StatusDeleted {
			out = append(out, c)
		}
	}
	return out
}

// directorRuntimes counts the Director's runtimes over all tenants.
func (inv inventory) directorRuntimes() int {
	n := 0
	for _, rts := range inv.Director.Tenants {
		n += len(rts)
	}
	return n
}

// events reads an operation's events through the operator API.
func events(t testing.TB, b *bt.Broker, operationID string) []runtime.Event {
	t.Helper()
	r := b.Get("/events?operation_ids=" + operationID)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	var out []runtime.Event
	r.JSON(t, &out)
	return out
}

// stepsOf lists the steps in the order they ran or were skipped, each once. A step run's event
// is written at its end (succeeded, retrying or failed); steps run one after another, so the
// order of their first events is the order they started.
func stepsOf(evs []runtime.Event) (started, skipped []string) {
	seen := map[string]bool{}
	for _, e := range evs {
		if seen[e.Step] || e.Step == "" {
			continue
		}
		switch e.Type {
		case "succeeded", "retrying", "failed":
			started = append(started, e.Step)
			seen[e.Step] = true
		case "skipped":
			skipped = append(skipped, e.Step)
			seen[e.Step] = true
		}
	}
	return started, skipped
}

// assertOnePerRuntime checks that every system holds exactly one object (AVS: one internal and one
// external evaluation) per runtime, each created once.
func assertOnePerRuntime(t *testing.T, inv inventory, n int) {
	t.Helper()
	assert.Len(t, inv.evaluations(), 2*n, "one internal and one external evaluation per runtime")
	assert.Len(t, inv.IAS.ServiceProviders, n)
	assert.Len(t, inv.EDP.DataTenants, n)
	assert.Len(t, inv.SM.Instances, n)
	assert.Len(t, inv.SM.Bindings, n)
	assert.Len(t, inv.liveClusters(), n)
	assert.Equal(t, n, inv.directorRuntimes())
	assertNoDuplicates(t, inv)
	assertOneCredentialEach(t, inv)
}

// assertOneCredentialEach checks that no extra valid credential exists: one client secret per
// IAS service provider and at most one valid one-time token per runtime in the Director.
func assertOneCredentialEach(t *testing.T, inv inventory) {
	t.Helper()
	for _, sp := range inv.IAS.ServiceProviders {
		assert.Equal(t, 1, sp.Secrets, "IAS service provider %s has %d client secrets", sp.Name, sp.Secrets)
	}
	for id, valid := range inv.Tokens {
		if assert.NotNil(t, valid, "the Director stand-in reports no validTokens for runtime %s", id) {
			// The agent is not running here, so the token may have expired unused (the Director's
			// five minutes) on a slow machine: what must not exist is a second valid one.
			assert.LessOrEqual(t, *valid, 1, "Director runtime %s has %d valid one-time tokens", id, *valid)
		}
	}
}

// assertNothingLeft checks that deprovisioning removed everything, each object once.
func assertNothingLeft(t *testing.T, inv inventory) {
	t.Helper()
	assert.Empty(t, inv.evaluations())
	assert.Empty(t, inv.IAS.ServiceProviders)
	assert.Empty(t, inv.EDP.DataTenants)
	assert.Empty(t, inv.SM.Instances)
	assert.Empty(t, inv.SM.Bindings)
	assert.Empty(t, inv.liveClusters())
	assert.Zero(t, inv.directorRuntimes())
	assertNoDuplicates(t, inv)
}

// provisionMany sends n AWS provisionings, each for its own global account and subaccount.
func provisionMany(t *testing.T, b *bt.Broker, n int, prefix string) (ids, ops []string) {
	t.Helper()
	ids, ops = make([]string, n), make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
		ga := fmt.Sprintf("ga-%s-%d", prefix, i)
		r := b.Put(bt.InstancePath(ids[i]), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams(fmt.Sprintf("rt-%s-%d", prefix, i)), bt.SAPContext(ga, "sa-"+ga)))
		require.Equal(t, http.StatusAccepted, r.Status, r.String())
		ops[i] = r.Operation()
	}
	return ids, ops
}

// deprovisionAll sends the deprovisioning of every instance and returns the operations.
func deprovisionAll(t *testing.T, b *bt.Broker, ids []string) []string {
	t.Helper()
	ops := make([]string, len(ids))
	for i, id := range ids {
		r := b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID))
		require.Equal(t, http.StatusAccepted, r.Status, r.String())
		ops[i] = r.Operation()
	}
	return ops
}

// maxCount is the largest value of a creation counter: 1 means no duplicates.
func maxCount(m map[string]int) int {
	top := 0
	for _, v := range m {
		top = max(top, v)
	}
	return top
}

// withoutAVSKillWindow takes out of inv the AVS evaluations a SIGKILL made twice, and returns it
// with the names it took. AVS gives an evaluation's ID only in the creation's answer and offers
// no look-up by name (internal/clients/avs/testdata/contract.json), so a kill between AVS's answer
// and the operation's write loses the ID and the next run creates the evaluation again; the extra
// one is unknown to the broker and outlives deprovisioning (docs/user/operations.md). What must
// hold still: no name more than twice, no more duplicates than the operations the kills held, and
// every other system exactly once.
func withoutAVSKillWindow(t *testing.T, inv inventory, held int) (inventory, map[string]bool) {
	t.Helper()
	twice := map[string]bool{}
	for name, count := range inv.AVS.CreatesByName {
		if count > 1 {
			assert.Equal(t, 2, count, "AVS evaluation %s created %d times", name, count)
			twice[name] = true
			inv.AVS.CreatesByName[name] = 1
		}
	}
	assert.LessOrEqual(t, len(twice), held, "AVS evaluations made twice: more than the operations the kills held")
	if len(twice) > 0 {
		t.Logf("AVS evaluations created twice across a lost write (a kill, a database outage; no look-up by name in the AVS API): %d", len(twice))
	}
	inv.AVS.Evaluations = keepOnePerName(inv.AVS.Evaluations, twice, 1)
	return inv, twice
}

// withoutAVSOrphans takes out of inv the evaluations named in twice that deprovisioning could not
// know of (at most one per name).
func withoutAVSOrphans(t *testing.T, inv inventory, twice map[string]bool) inventory {
	t.Helper()
	left := keepOnePerName(inv.AVS.Evaluations, twice, 0)
	if n := len(inv.AVS.Evaluations) - len(left); n > 0 {
		t.Logf("AVS evaluations the broker never had the ID of, left for an operator: %d", n)
	}
	inv.AVS.Evaluations = left
	// Their creations are counted again in this newer inventory: the ones withoutAVSKillWindow
	// accepted count once; any other second creation is still a duplicate.
	for name := range twice {
		if inv.AVS.CreatesByName[name] == 2 {
			inv.AVS.CreatesByName[name] = 1
		}
	}
	return inv
}

// keepOnePerName keeps at most keep evaluations of each name in names, and every other one.
func keepOnePerName(evs []avsstandin.Object, names map[string]bool, keep int) []avsstandin.Object {
	seen := map[string]int{}
	var out []avsstandin.Object
	for _, e := range evs {
		if names[e.Name] {
			seen[e.Name]++
			if seen[e.Name] > keep {
				continue
			}
		}
		out = append(out, e)
	}
	return out
}
