package reconciler_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/contracttest"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/reconciler"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestContract_Requests captures the client's requests on a loopback server and checks them
// against the published OpenAPI of the mothership (testdata/contract.json).
func TestContract_Requests(t *testing.T) {
	f := contracttest.Load(t, "testdata/contract.json")
	rec := contracttest.NewRecorder(t, func(w http.ResponseWriter, r contracttest.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"cluster":"5c1b8b1e-8a5e-4a7f-9a55-0b1c1d3f2e01","clusterVersion":1,"configurationVersion":1,` +
			`"status":"reconcile_error_retryable","statusURL":"http://r/v1/clusters/x/status"}`))
	})
	c, err := reconciler.New(reconciler.Config{URL: rec.URL, Timeout: 2 * time.Second,
		RetryInitialBackoff: time.Millisecond, RetryMaxBackoff: time.Millisecond})
	require.NoError(t, err)
	ctx := sandboxtest.Context(t, 10*time.Second)

	id := "5c1b8b1e-8a5e-4a7f-9a55-0b1c1d3f2e01"
	in := cluster(id)
	// A component from the Kyma release (no URL) with no configuration, and no administrators:
	// every field the API requires is still sent.
	in.KymaConfig.Administrators = nil
	in.KymaConfig.Components = []reconciler.Component{{Component: "istio", Namespace: "istio-system", Version: "2.20.0"}}
	st, err := c.ApplyClusterConfig(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, reconciler.StatusReconcileErrorRetryable, st.Status)
	_, err = c.GetStatus(ctx, id)
	require.NoError(t, err)
	require.NoError(t, c.DeleteCluster(ctx, id))

	reqs := rec.Requests()
	require.Len(t, reqs, 3)
	for _, r := range reqs {
		assert.Empty(t, f.Check(r, ""), "%s %s", r.Method, r.Path)
	}
}

// The client knows every status of the API's enum, and no other.
func TestContract_StatusEnum(t *testing.T) {
	f := contracttest.Load(t, "testdata/contract.json")
	assert.ElementsMatch(t, f.Enums["status"], reconciler.Statuses())
}
