package eventhubs_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit/clientkittest"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/eventhubs"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/azurestandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const subscription = "5e7a1c2d-0000-4000-8000-00000000abcd"

type env struct {
	sb  *sandbox.Sandbox
	st  *azurestandin.Server
	cfg eventhubs.Config
	// clock is the stand-in's time, moved by tests.
	clock *sandboxtest.Clock
}

func newEnv(t *testing.T, seed uint64, opts azurestandin.Options) *env {
	t.Helper()
	c := sandboxtest.NewWallClock()
	if opts.LongRunning == "" {
		opts.LongRunning = azurestandin.LongRunningNone // the tests of long-running creations say so
	}
	opts.ClientID, opts.ClientSecret, opts.SubscriptionID, opts.Now = "keb", "s3cret", subscription, c.Now
	st := azurestandin.New(opts)
	sb, base := sandboxtest.Serve(t, sandbox.Options{Seed: seed}, st)
	return &env{sb: sb, st: st, clock: c, cfg: eventhubs.Config{
		ARMURL:              base + "/azure",
		TokenURL:            base + "/azure/oauth2/v2.0/token",
		ClientID:            "keb",
		ClientSecret:        "s3cret",
		SubscriptionID:      subscription,
		Timeout:             2 * time.Second,
		RetryInitialBackoff: 2 * time.Millisecond,
		RetryMaxBackoff:     20 * time.Millisecond,
	}}
}

func (e *env) client(t *testing.T) *eventhubs.Client {
	return sandboxtest.NewClient(t, eventhubs.New, e.cfg)
}

func request(name string) eventhubs.NamespaceRequest {
	return eventhubs.NamespaceRequest{ResourceGroup: "rg-" + name, Name: name, Region: "westeurope",
		Tags: map[string]string{"InstanceID": name}}
}

func TestConfigFromEnvironment(t *testing.T) {
	t.Setenv("APP_AZURE_TOKEN_URL", "https://login.microsoftonline.com/tenant/oauth2/v2.0/token")
	t.Setenv("APP_AZURE_CLIENT_ID", "id")
	t.Setenv("APP_AZURE_CLIENT_SECRET", "secret")
	t.Setenv("APP_AZURE_SUBSCRIPTION_ID", "sub")
	var cfg eventhubs.Config
	require.NoError(t, envconfig.Process("APP", &cfg))
	assert.Equal(t, eventhubs.Config{ARMURL: "https://management.azure.com",
		TokenURL: "https://login.microsoftonline.com/tenant/oauth2/v2.0/token", ClientID: "id", ClientSecret: "secret",
		SubscriptionID: "sub", Timeout: 10 * time.Second, Config: clientkit.Config{Calls: clientkittest.DefaultCalls}, RetryInitialBackoff: 200 * time.Millisecond,
		RetryMaxBackoff: 10 * time.Second}, cfg)
	require.NoError(t, cfg.Validate())

	c, err := eventhubs.New(eventhubs.Config{TokenURL: "https://login.example/t/oauth2/v2.0/token", ClientID: "id",
		ClientSecret: "s", SubscriptionID: "sub"})
	require.NoError(t, err)
	assert.Equal(t, eventhubs.DefaultARMURL, c.Config().ARMURL, "the ARM URL defaults")
	assert.Equal(t, 10*time.Second, c.Config().Timeout)

	_, err = eventhubs.New(eventhubs.Config{ARMURL: "management.azure.com", SubscriptionID: "a/b"})
	assert.ErrorContains(t, err, "APP_AZURE_ARM_URL must be an absolute http(s) URL")
	assert.ErrorContains(t, err, "APP_AZURE_TOKEN_URL is required")
	assert.ErrorContains(t, err, "APP_AZURE_CLIENT_ID is required")
	assert.ErrorContains(t, err, "APP_AZURE_CLIENT_SECRET is required")
	assert.ErrorContains(t, err, "APP_AZURE_SUBSCRIPTION_ID must not contain")
	_, err = eventhubs.New(eventhubs.Config{})
	assert.ErrorContains(t, err, "APP_AZURE_SUBSCRIPTION_ID is required")
}

func TestNamespaceLifecycle(t *testing.T) {
	e := newEnv(t, 1, azurestandin.Options{ActivationTime: time.Minute, DeletionTime: 5 * time.Minute})
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)
	req := request("kyma-ns-1")

	ns, err := c.EnsureNamespace(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, &eventhubs.Namespace{
		ID:   "/subscriptions/" + subscription + "/resourceGroups/rg-kyma-ns-1/providers/Microsoft.EventHub/namespaces/kyma-ns-1",
		Name: "kyma-ns-1", ResourceGroup: "rg-kyma-ns-1", Region: "westeurope", ProvisioningState: "Activating",
	}, ns)
	_, err = c.ConnectionString(ctx, req.ResourceGroup, req.Name)
	require.Error(t, err, "no keys while activating")
	assert.False(t, eventhubs.IsTemporary(err))

	again, err := c.EnsureNamespace(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, "Activating", again.ProvisioningState)
	e.clock.Advance(time.Minute)
	again, err = c.EnsureNamespace(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, eventhubs.StateSucceeded, again.ProvisioningState)
	assert.Equal(t, ns.ID, again.ID)

	conn, err := c.ConnectionString(ctx, req.ResourceGroup, req.Name)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(conn, "Endpoint=sb://kyma-ns-1.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey="), conn)

	snap := e.st.Snapshot()
	require.Len(t, snap.ResourceGroups, 1)
	g := snap.ResourceGroups[0]
	assert.Equal(t, "westeurope", g.Location)
	assert.Equal(t, map[string]string{"InstanceID": "kyma-ns-1"}, g.Tags)
	require.Len(t, g.Namespaces, 1)
	assert.Equal(t, azurestandin.Sku{Name: "Standard", Tier: "Standard", Capacity: 1}, g.Namespaces[0].Sku)
	assert.True(t, g.Namespaces[0].KafkaEnabled)
	assert.Equal(t, map[string]string{"InstanceID": "kyma-ns-1"}, g.Namespaces[0].Tags)
	assert.Equal(t, map[string]int{"kyma-ns-1": 1}, snap.NamespacePutsByName, "an existing namespace is not PUT again")
	assert.Equal(t, map[string]int{"kyma-ns-1": 1}, snap.NamespaceCreatesByName)
	assert.Equal(t, map[string]int{"rg-kyma-ns-1": 1}, snap.GroupCreatesByName)
	assert.Equal(t, 1, snap.Calls["token"], "the token is reused")

	// deletion takes DeletionTime; meanwhile the namespace cannot be ensured
	gone, err := c.DeleteResourceGroup(ctx, req.ResourceGroup)
	require.NoError(t, err)
	assert.False(t, gone)
	gone, err = c.DeleteResourceGroup(ctx, req.ResourceGroup)
	require.NoError(t, err)
	assert.False(t, gone)
	_, err = c.EnsureNamespace(sandboxtest.Context(t, 200*time.Millisecond), req)
	require.Error(t, err)
	assert.True(t, eventhubs.IsTemporary(err), "%v", err)
	assert.ErrorContains(t, err, "is being deleted")

	e.clock.Advance(5 * time.Minute)
	gone, err = c.DeleteResourceGroup(ctx, req.ResourceGroup)
	require.NoError(t, err)
	assert.True(t, gone)
	gone, err = c.DeleteResourceGroup(ctx, req.ResourceGroup)
	require.NoError(t, err)
	assert.True(t, gone, "deleting a missing group succeeds")

	_, err = c.ConnectionString(ctx, req.ResourceGroup, req.Name)
	require.Error(t, err)
	assert.True(t, eventhubs.IsNotFound(err))
	assert.False(t, eventhubs.IsTemporary(err))
	assert.Equal(t, "ResourceGroupNotFound", eventhubs.Code(err))
	assert.ErrorContains(t, err, `reading the connection string of Azure Event Hubs namespace "kyma-ns-1"`)

	snap = e.st.Snapshot()
	assert.Empty(t, snap.ResourceGroups)
	assert.Equal(t, map[string]int{"rg-kyma-ns-1": 1}, snap.GroupDeletesByName, "one DELETE while the group was being deleted")

	// and the namespace can be created anew
	ns, err = c.EnsureNamespace(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, "Activating", ns.ProvisioningState)
	assert.Equal(t, 2, e.st.Snapshot().NamespaceCreatesByName["kyma-ns-1"])
}

func TestIdempotentCreateUnderInjectedErrors(t *testing.T) {
	e := newEnv(t, 2026, azurestandin.Options{})
	// Every call tries up to 100 times, as the step's durable retries would; the breaker is off, so
	// that a run of injected failures does not stop the calls this test makes.
	e.cfg.Calls.Attempts, e.cfg.Calls.BreakerThreshold = 100, -1
	require.NoError(t, e.sb.SetFaults(azurestandin.Name, sandbox.Faults{ErrorRate: 0.3, LostResponseRate: 0.3}))
	c := e.client(t)
	ctx := sandboxtest.Context(t, 60*time.Second)

	const n = 30
	for i := range n {
		req := request(fmt.Sprintf("namespace-%02d", i))
		ns, err := c.EnsureNamespace(ctx, req)
		require.NoError(t, err, req.Name)
		assert.Equal(t, req.Name, ns.Name)
		assert.Equal(t, eventhubs.StateSucceeded, ns.ProvisioningState)
		conn, err := c.ConnectionString(ctx, req.ResourceGroup, req.Name)
		require.NoError(t, err, req.Name)
		assert.Contains(t, conn, req.Name+".servicebus.windows.net")
	}

	snap := e.st.Snapshot()
	assert.Len(t, snap.ResourceGroups, n)
	for _, g := range snap.ResourceGroups {
		assert.Len(t, g.Namespaces, 1, g.Name)
	}
	assert.Len(t, snap.NamespaceCreatesByName, n)
	for name, count := range snap.NamespaceCreatesByName {
		assert.Equal(t, 1, count, name)
	}
	for name, count := range snap.GroupCreatesByName {
		assert.Equal(t, 1, count, name)
	}
	st, err := e.sb.Stats(azurestandin.Name)
	require.NoError(t, err)
	assert.Greater(t, st.Errors500+st.Errors503, 15, "the retries were exercised: %+v", st)

	// and deleting them all under the same faults leaves nothing
	for i := range n {
		gone, err := c.DeleteResourceGroup(ctx, request(fmt.Sprintf("namespace-%02d", i)).ResourceGroup)
		require.NoError(t, err)
		assert.True(t, gone)
	}
	snap = e.st.Snapshot()
	assert.Empty(t, snap.ResourceGroups)
	assert.Len(t, snap.GroupDeletesByName, n)
	for name, count := range snap.GroupDeletesByName {
		assert.Equal(t, 1, count, name)
	}
}

func TestPermanentFailuresAreNotRetried(t *testing.T) {
	e := newEnv(t, 3, azurestandin.Options{})
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)

	bad := request("ns") // namespace names have 6-50 characters
	_, err := c.EnsureNamespace(ctx, bad)
	require.Error(t, err)
	assert.False(t, eventhubs.IsTemporary(err))
	var ae *eventhubs.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
	assert.Equal(t, 1, ae.Attempts)
	assert.ErrorContains(t, err, `ensuring Azure Event Hubs namespace "ns" in resource group "rg-ns"`)
	assert.ErrorContains(t, err, "The specified service namespace is invalid")
	assert.Equal(t, 1, e.st.Snapshot().Calls["namespace.put"])

	_, err = c.EnsureNamespace(ctx, eventhubs.NamespaceRequest{Name: "namespace-x"})
	require.Error(t, err)
	assert.False(t, eventhubs.IsTemporary(err))
	assert.ErrorContains(t, err, "the region is empty")

	// the group exists in another region
	_, err = c.EnsureNamespace(ctx, request("namespace-a"))
	require.NoError(t, err)
	moved := request("namespace-b")
	moved.ResourceGroup, moved.Region = "rg-namespace-a", "northeurope"
	_, err = c.EnsureNamespace(ctx, moved)
	require.Error(t, err)
	assert.False(t, eventhubs.IsTemporary(err))
	assert.Equal(t, "InvalidResourceGroupLocation", eventhubs.Code(err))

	_, err = c.ConnectionString(ctx, "rg-namespace-a", "namespace-missing")
	assert.True(t, eventhubs.IsNotFound(err))
	assert.Equal(t, "ResourceNotFound", eventhubs.Code(err))

	// a wrong subscription is not a missing group: deleting must not report it gone
	e.cfg.SubscriptionID = "00000000-0000-0000-0000-00000000dead"
	other := e.client(t)
	gone, err := other.DeleteResourceGroup(ctx, "rg-namespace-a")
	require.Error(t, err)
	assert.False(t, gone)
	assert.False(t, eventhubs.IsTemporary(err))
	assert.False(t, eventhubs.IsNotFound(err))
	assert.Equal(t, "SubscriptionNotFound", eventhubs.Code(err))
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, 1, ae.Attempts)
	_, err = other.EnsureNamespace(ctx, request("namespace-c"))
	assert.Equal(t, "SubscriptionNotFound", eventhubs.Code(err))

	e.cfg.SubscriptionID = subscription
	e.cfg.ClientSecret = "wrong"
	_, err = e.client(t).DeleteResourceGroup(ctx, "rg-namespace-a")
	require.Error(t, err)
	assert.False(t, eventhubs.IsTemporary(err))
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusUnauthorized, ae.StatusCode)
	assert.Equal(t, 1, ae.Attempts)
	assert.Equal(t, 1, e.st.Snapshot().Calls["token.rejected"])
	assert.Len(t, e.st.Snapshot().ResourceGroups, 2, "nothing was deleted (rg-ns stays from the rejected namespace)")
}

func TestOutageLongerThanDeadlineIsTemporary(t *testing.T) {
	e := newEnv(t, 4, azurestandin.Options{})
	sandboxtest.Outage(t, e.sb, azurestandin.Name)
	c := e.client(t)

	start := time.Now()
	_, err := c.EnsureNamespace(sandboxtest.Context(t, 300*time.Millisecond), request("namespace-outage"))
	clientkittest.RequireGaveUp(t, err, start, 3)
	assert.True(t, eventhubs.IsTemporary(err), "%v", err)
	gone, err := c.DeleteResourceGroup(sandboxtest.Context(t, 100*time.Millisecond), "rg-namespace-outage")
	assert.True(t, eventhubs.IsTemporary(err), "%v", err)
	assert.False(t, gone)
	assert.Empty(t, e.st.Snapshot().NamespaceCreatesByName)

	// once the outage is over the same call succeeds
	require.NoError(t, e.sb.SetFaults(azurestandin.Name, sandbox.Faults{}))
	_, err = c.EnsureNamespace(sandboxtest.Context(t, 5*time.Second), request("namespace-outage"))
	require.NoError(t, err)
	assert.Equal(t, 1, e.st.Snapshot().NamespaceCreatesByName["namespace-outage"])
}

func TestRejectedTokenIsReplaced(t *testing.T) {
	e := newEnv(t, 6, azurestandin.Options{})
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)
	_, err := c.DeleteResourceGroup(ctx, "rg-none")
	require.NoError(t, err)

	// ARM now considers the cached token expired while the client does not
	e.clock.Advance(2 * time.Hour)
	gone, err := c.DeleteResourceGroup(ctx, "rg-none")
	require.NoError(t, err)
	assert.True(t, gone)
	snap := e.st.Snapshot()
	assert.Equal(t, 2, snap.Calls["token"])
	assert.Equal(t, 1, snap.Calls["unauthorized"])
}

func TestNetworkErrorsAreTemporary(t *testing.T) {
	addr := sandboxtest.ClosedAddr(t)

	c, err := eventhubs.New(eventhubs.Config{ARMURL: "http://" + addr, TokenURL: "http://" + addr + "/oauth2/v2.0/token",
		ClientID: "x", ClientSecret: "y", SubscriptionID: "s", RetryInitialBackoff: time.Millisecond, RetryMaxBackoff: 5 * time.Millisecond})
	require.NoError(t, err)
	_, err = c.DeleteResourceGroup(sandboxtest.Context(t, 100*time.Millisecond), "rg")
	require.Error(t, err)
	assert.True(t, eventhubs.IsTemporary(err), "%v", err)
	assert.ErrorContains(t, err, "after 3 attempt(s)", "bounded by its attempts, not by the deadline")
	assert.ErrorContains(t, err, `deleting Azure resource group "rg"`)
}
