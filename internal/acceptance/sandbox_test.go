package acceptance

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/stretchr/testify/require"
)

// The embedded sandbox is driven through its HTTP admin API, as a user would.

var allSystems = []string{"avs", "edp", "ias", "servicemanager", "azure", "reconciler", "director"}

// putFaults sets one system's faults: PUT /_sandbox/<system>/faults.
func putFaults(t testing.TB, sandboxURL, system string, f sandbox.Faults) {
	t.Helper()
	body, err := json.Marshal(f)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPut, sandboxURL+"/_sandbox/"+system+"/faults", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Less(t, resp.StatusCode, 300, "setting the faults of %s", system)
}

// stats reads one system's request counters: GET /_sandbox/<system>/stats.
func stats(t testing.TB, sandboxURL, system string) sandbox.Stats {
	t.Helper()
	resp, err := http.Get(sandboxURL + "/_sandbox/" + system + "/stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, system)
	var st sandbox.Stats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

// sandboxRequests is the number of requests every system has seen.
func sandboxRequests(t testing.TB, sandboxURL string) int {
	t.Helper()
	n := 0
	for _, sys := range allSystems {
		n += stats(t, sandboxURL, sys).Requests
	}
	return n
}
