package eventhubs_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/eventhubs"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/azurestandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A creation ARM answers 202 Accepted is followed through its Azure-AsyncOperation URL, one
// request a call, until it succeeds; the namespace is then returned as a synchronous creation's.
func TestLongRunningCreation_FollowsAzureAsyncOperation(t *testing.T) {
	e := newEnv(t, 1, azurestandin.Options{LongRunning: azurestandin.LongRunningAll, LongRunningPolls: 2, RetryAfter: 15 * time.Second})
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)
	req := request("kyma-lro-1")

	ns, err := c.EnsureNamespace(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, eventhubs.StateAccepted, ns.ProvisioningState)
	assert.Equal(t, "kyma-lro-1", ns.Name)
	assert.Equal(t, "rg-kyma-lro-1", ns.ResourceGroup)
	assert.Equal(t, 15*time.Second, ns.RetryAfter, "Retry-After")
	require.NotNil(t, ns.Operation)
	assert.True(t, strings.HasPrefix(ns.Operation.AsyncOperation, e.cfg.ARMURL+"/subscriptions/"), ns.Operation.AsyncOperation)
	assert.True(t, strings.HasPrefix(ns.Operation.Location, e.cfg.ARMURL+"/subscriptions/"), ns.Operation.Location)
	_, err = c.ConnectionString(ctx, req.ResourceGroup, req.Name)
	assert.True(t, eventhubs.IsNotFound(err), "ARM shows the namespace once the operation succeeded: %v", err)

	first := *ns.Operation
	for range 2 {
		req.Operation = ns.Operation
		ns, err = c.EnsureNamespace(ctx, req)
		require.NoError(t, err)
		assert.Equal(t, eventhubs.StateInProgress, ns.ProvisioningState)
		require.NotNil(t, ns.Operation)
		assert.Equal(t, first, *ns.Operation, "the same operation")
		assert.Equal(t, 15*time.Second, ns.RetryAfter)
	}
	req.Operation = ns.Operation
	ns, err = c.EnsureNamespace(ctx, req)
	require.NoError(t, err)
	assert.Nil(t, ns.Operation)
	assert.Zero(t, ns.RetryAfter)
	assert.Equal(t, eventhubs.StateSucceeded, ns.ProvisioningState)
	assert.Equal(t, "/subscriptions/"+subscription+"/resourceGroups/rg-kyma-lro-1/providers/Microsoft.EventHub/namespaces/kyma-lro-1", ns.ID)
	conn, err := c.ConnectionString(ctx, req.ResourceGroup, req.Name)
	require.NoError(t, err)
	assert.Contains(t, conn, "kyma-lro-1.servicebus.windows.net")

	snap := e.st.Snapshot()
	assert.Equal(t, 1, snap.Calls["namespace.put"], "one PUT: the polls follow the operation")
	assert.Equal(t, 3, snap.Calls["operation.status"], "one request a call, Azure-AsyncOperation preferred")
	assert.Zero(t, snap.Calls["operation.result"])
	assert.Equal(t, 1, snap.NamespaceCreatesByName["kyma-lro-1"])
}

// Without an Azure-AsyncOperation URL the client follows Location: 202 while the operation runs,
// then the namespace.
func TestLongRunningCreation_FollowsLocation(t *testing.T) {
	e := newEnv(t, 1, azurestandin.Options{LongRunning: azurestandin.LongRunningAll, LongRunningPolls: 1})
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)
	req := request("kyma-lro-2")

	ns, err := c.EnsureNamespace(ctx, req)
	require.NoError(t, err)
	require.NotNil(t, ns.Operation)
	assert.Equal(t, 10*time.Second, ns.RetryAfter, "the stand-in's default, ARM's minimum")
	req.Operation = &eventhubs.Operation{Location: ns.Operation.Location}
	ns, err = c.EnsureNamespace(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, eventhubs.StateInProgress, ns.ProvisioningState)
	require.NotNil(t, ns.Operation)
	assert.Empty(t, ns.Operation.AsyncOperation)
	assert.Equal(t, req.Operation.Location, ns.Operation.Location)

	req.Operation = ns.Operation
	ns, err = c.EnsureNamespace(ctx, req)
	require.NoError(t, err)
	assert.Nil(t, ns.Operation)
	assert.Equal(t, eventhubs.StateSucceeded, ns.ProvisioningState)
	assert.Equal(t, "kyma-lro-2", ns.Name)
	snap := e.st.Snapshot()
	assert.Equal(t, 2, snap.Calls["operation.result"])
	assert.Zero(t, snap.Calls["operation.status"])
	assert.Equal(t, 1, snap.Calls["namespace.put"])
}

// A failed operation is a permanent error naming Azure, its code and its message, through either URL.
func TestLongRunningCreation_FailureNamesAzuresError(t *testing.T) {
	for _, via := range []string{"Azure-AsyncOperation", "Location"} {
		t.Run(via, func(t *testing.T) {
			e := newEnv(t, 1, azurestandin.Options{LongRunning: azurestandin.LongRunningFail, LongRunningPolls: 1})
			c := e.client(t)
			ctx := sandboxtest.Context(t, 10*time.Second)
			req := request("kyma-lro-3")
			ns, err := c.EnsureNamespace(ctx, req)
			require.NoError(t, err)
			require.NotNil(t, ns.Operation)
			follow := *ns.Operation
			if via == "Location" {
				follow.AsyncOperation = ""
			}
			req.Operation = &follow
			ns, err = c.EnsureNamespace(ctx, req)
			require.NoError(t, err)
			assert.Equal(t, eventhubs.StateInProgress, ns.ProvisioningState)

			_, err = c.EnsureNamespace(ctx, req)
			require.Error(t, err)
			assert.False(t, eventhubs.IsTemporary(err), "a failed operation is final: %v", err)
			assert.Contains(t, err.Error(), "Azure reports")
			assert.Contains(t, err.Error(), azurestandin.CodeCreationFailed)
			assert.Contains(t, err.Error(), "The sandbox failed the creation of namespace 'kyma-lro-3'")
			assert.Equal(t, 1, e.st.Snapshot().Calls["namespace.put"])
		})
	}
}

// The operation's URLs lost (a crash before they were kept): the PUT is sent again, ARM answers
// 409 while the operation runs (temporary), and the namespace once it is over; never a duplicate.
func TestLongRunningCreation_LostURLsPutAgain(t *testing.T) {
	e := newEnv(t, 1, azurestandin.Options{LongRunning: azurestandin.LongRunningAll, LongRunningTime: time.Minute})
	e.cfg.Calls.Attempts = 1
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)
	req := request("kyma-lro-4")

	ns, err := c.EnsureNamespace(ctx, req)
	require.NoError(t, err)
	require.NotNil(t, ns.Operation)

	_, err = c.EnsureNamespace(ctx, req)
	require.Error(t, err)
	assert.True(t, eventhubs.IsTemporary(err), "the earlier operation still runs: %v", err)
	assert.Contains(t, err.Error(), "Azure still runs another operation")

	e.clock.Advance(time.Minute)
	ns, err = c.EnsureNamespace(ctx, req)
	require.NoError(t, err)
	assert.Nil(t, ns.Operation)
	assert.Equal(t, eventhubs.StateSucceeded, ns.ProvisioningState)
	assert.Equal(t, 1, e.st.Snapshot().NamespaceCreatesByName["kyma-lro-4"])
}

// An operation ARM no longer knows (404) is given up: the client PUTs the namespace again.
func TestLongRunningCreation_UnknownOperationStartsOver(t *testing.T) {
	e := newEnv(t, 1, azurestandin.Options{})
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)
	req := request("kyma-lro-5")
	ops := e.cfg.ARMURL + "/subscriptions/" + subscription + "/providers/Microsoft.EventHub/locations/westeurope/"
	for _, op := range []eventhubs.Operation{
		{AsyncOperation: ops + "operationStatuses/0123?api-version=2021-11-01"},
		{Location: ops + "operationResults/0123?api-version=2021-11-01"},
		{AsyncOperation: "https://elsewhere.example/op"}, // kept from another configuration: no token goes there
	} {
		req.Operation = &op
		ns, err := c.EnsureNamespace(ctx, req)
		require.NoError(t, err, "%+v", op)
		assert.Nil(t, ns.Operation)
		assert.Equal(t, eventhubs.StateSucceeded, ns.ProvisioningState)
	}
	snap := e.st.Snapshot()
	assert.Equal(t, 1, snap.Calls["operation.status"])
	assert.Equal(t, 1, snap.Calls["operation.result"])
	assert.Equal(t, 1, snap.NamespaceCreatesByName["kyma-lro-5"])
}

// Long-running creations under injected errors and lost answers: followed to the end, each
// namespace created once.
func TestLongRunningCreation_UnderInjectedErrors(t *testing.T) {
	e := newEnv(t, 7, azurestandin.Options{LongRunning: azurestandin.LongRunningSome, LongRunningPolls: 2, LongRunningTime: 50 * time.Millisecond})
	e.cfg.Calls.Attempts, e.cfg.Calls.BreakerThreshold = 100, -1
	require.NoError(t, e.sb.SetFaults(azurestandin.Name, sandbox.Faults{ErrorRate: 0.2, LostResponseRate: 0.2}))
	c := e.client(t)
	ctx := sandboxtest.Context(t, 60*time.Second)

	const n = 12
	for i := range n {
		req := request(fmt.Sprintf("namespace-lro-%02d", i))
		for {
			ns, err := c.EnsureNamespace(ctx, req)
			if err != nil {
				require.True(t, eventhubs.IsTemporary(err), "%s: %v", req.Name, err)
				require.NoError(t, ctx.Err())
				continue
			}
			if ns.ProvisioningState == eventhubs.StateSucceeded {
				break
			}
			req.Operation = ns.Operation
		}
	}
	snap := e.st.Snapshot()
	assert.Len(t, snap.NamespaceCreatesByName, n)
	for name, count := range snap.NamespaceCreatesByName {
		assert.Equal(t, 1, count, name)
	}
	assert.Positive(t, snap.Calls["operation.status"], "some creations were long-running")
}

func TestRetryAfter(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"":                              eventhubs.DefaultRetryAfter,
		"15":                            15 * time.Second,
		" 30 ":                          30 * time.Second,
		"0":                             eventhubs.MinRetryAfter,
		"100000":                        eventhubs.MaxRetryAfter,
		"-3":                            eventhubs.DefaultRetryAfter,
		"Wed, 21 Oct 2015 07:28:00 GMT": eventhubs.DefaultRetryAfter, // ARM sends seconds only
	} {
		h := http.Header{}
		if v != "" {
			h.Set("Retry-After", v)
		}
		assert.Equal(t, want, eventhubs.RetryAfter(h), "%q", v)
	}
}
