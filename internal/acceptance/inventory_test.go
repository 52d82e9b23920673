package acceptance

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/avs"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/azure"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/director"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/edp"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/ias"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/reconciler"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/servicemanager"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/require"
)

// inventory is what exists in every system, read over the sandbox's inspection endpoints.
type inventory struct {
	AVS        avs.Objects
	EDP        edp.Objects
	IAS        ias.Objects
	SM         servicemanager.Objects
	Azure      azure.Objects
	Reconciler reconciler.Objects
	Director   director.Objects
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
		require.Equal(t, http.StatusOK, resp.StatusCode, sys)
		require.NoError(t, json.NewDecoder(resp.Body).Decode(into), sys)
		resp.Body.Close()
	}
	return inv
}

// evaluations are the AVS evaluations other than the configured parents.
func (inv inventory) evaluations() []avs.Object {
	var out []avs.Object
	for _, e := range inv.AVS.Evaluations {
		if e.ID != standins.AVSParentID {
			out = append(out, e)
		}
	}
	return out
}

// liveClusters are the reconciler's clusters not deleted.
func (inv inventory) liveClusters() []reconciler.Object {
	var out []reconciler.Object
	for _, c := range inv.Reconciler.Clusters {
		if c.Status != reconciler.StatusDeleted {
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

// stepsOf lists the steps in the order they started or were skipped, each once.
func stepsOf(evs []runtime.Event) (started, skipped []string) {
	seen := map[string]bool{}
	for _, e := range evs {
		if seen[e.Step] || e.Step == "" {
			continue
		}
		switch e.Type {
		case "started":
			started = append(started, e.Step)
			seen[e.Step] = true
		case "skipped":
			skipped = append(skipped, e.Step)
			seen[e.Step] = true
		}
	}
	return started, skipped
}

// maxCount is the largest value of a creation counter: 1 means no duplicates.
func maxCount(m map[string]int) int {
	top := 0
	for _, v := range m {
		top = max(top, v)
	}
	return top
}
