package operator_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 35: GET /runtimes?connection_status=true shows the provisioner's runtimeConnectionStatus,
// which follows what the Runtime Agent reports in the sandbox's Director: Disconnected, naming
// reconnectRuntimeAgent, once the agent reports FAILED.
func TestRuntimesShowTheAgentsConnection(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{})
	id, ga := uuid.NewString(), "ga-conn"
	b.WaitSucceeded(id, b.Provision(id, "conn", ga))

	// Without connection_status the Director is not asked, whatever else is (asked first: the
	// provisioner keeps what it read a while).
	before, err := b.Sandbox.Stats("director")
	require.NoError(t, err)
	var page runtime.Page
	r := b.Get("/runtimes?kyma_config=true&cluster_config=true&instance_id=" + id)
	r.JSON(t, &page)
	assert.Nil(t, page.Data[0].RuntimeConnectionStatus, "not asked")
	assert.NotEmpty(t, page.Data[0].ClusterConfig)
	after, err := b.Sandbox.Stats("director")
	require.NoError(t, err)
	assert.Equal(t, before.Requests, after.Requests, "requests to the Director")

	// The runtime in the Director (the provisioner's tenant is the global account), set FAILED
	// as the agent does when its certificate is refused.
	page = runtime.Page{}
	r = b.Get("/runtimes?instance_id=" + id)
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	r.JSON(t, &page)
	require.Len(t, page.Data, 1)
	rid := page.Data[0].RuntimeID
	q, err := json.Marshal(rid)
	require.NoError(t, err)
	var found struct {
		R struct {
			Data []struct {
				ID   string `json:"id"`
				Name string `json:"name"`
			} `json:"data"`
		} `json:"r"`
	}
	sandboxtest.DirectorGraphQL(t, b.SandboxURL, ga, `query($f: [LabelFilter!]) { r: runtimes(filter: $f) { data { id name } } }`,
		map[string]any{"f": []map[string]any{{"key": "kyma_runtime_id", "query": string(q)}}}, &found)
	require.Len(t, found.R.Data, 1, "the provisioner registered the runtime")
	var updated any
	sandboxtest.DirectorGraphQL(t, b.SandboxURL, ga, `mutation($id: ID!, $in: RuntimeUpdateInput!) { r: updateRuntime(id: $id, in: $in) { id } }`,
		map[string]any{"id": found.R.Data[0].ID, "in": map[string]any{"name": found.R.Data[0].Name, "labels": map[string]any{"kyma_runtime_id": rid}, "statusCondition": "FAILED"}}, &updated)

	page = runtime.Page{}
	r = b.Get("/runtimes?connection_status=true&instance_id=" + id)
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	r.JSON(t, &page)
	require.Len(t, page.Data, 1)
	d := page.Data[0]
	assert.Empty(t, d.ConfigError)
	require.NotNil(t, d.RuntimeConnectionStatus)
	assert.Equal(t, "Disconnected", d.RuntimeConnectionStatus.Status)
	require.Len(t, d.RuntimeConnectionStatus.Errors, 1)
	assert.Contains(t, d.RuntimeConnectionStatus.Errors[0], "reconnectRuntimeAgent")
	assert.Empty(t, d.KymaConfig, "only what is asked")

	page = runtime.Page{}
	r = b.Get("/runtimes?instance_id=" + id)
	r.JSON(t, &page)
	assert.Nil(t, page.Data[0].RuntimeConnectionStatus, "not asked")
	assert.Equal(t, http.StatusBadRequest, b.Get("/runtimes?connection_status=maybe").Status)
}
