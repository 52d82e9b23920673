package reconciler_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit/clientkittest"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/reconciler"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/reconcilerstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type env struct {
	sb    *sandbox.Sandbox
	st    *reconcilerstandin.Server
	cfg   reconciler.Config
	url   string
	clock *sandboxtest.Clock
}

func newEnv(t *testing.T, seed uint64, opts reconcilerstandin.Options) *env {
	t.Helper()
	e := &env{clock: sandboxtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	opts.Now = e.clock.Now
	e.st = reconcilerstandin.New(opts)
	e.sb, e.url = sandboxtest.Serve(t, sandbox.Options{Seed: seed}, e.st)
	e.cfg = reconciler.Config{
		URL:                 e.url + "/reconciler",
		Timeout:             2 * time.Second,
		RetryInitialBackoff: 2 * time.Millisecond,
		RetryMaxBackoff:     20 * time.Millisecond,
	}
	return e
}

func (e *env) client(t *testing.T) *reconciler.Client {
	return sandboxtest.NewClient(t, reconciler.New, e.cfg)
}

func (e *env) object(t *testing.T, runtimeID string) reconcilerstandin.Object {
	t.Helper()
	for _, o := range e.st.Snapshot().Clusters {
		if o.RuntimeID == runtimeID {
			return o
		}
	}
	require.FailNow(t, "no cluster "+runtimeID)
	return reconcilerstandin.Object{}
}

func cluster(runtimeID string, components ...string) reconciler.Cluster {
	c := reconciler.Cluster{
		RuntimeID:    runtimeID,
		RuntimeInput: reconciler.RuntimeInput{Name: "shoot-" + runtimeID, Description: "SKR " + runtimeID},
		KymaConfig: reconciler.KymaConfig{Version: "2.20.0", Profile: "production",
			Administrators: []string{"admin@example.com"}},
		Metadata: reconciler.Metadata{GlobalAccountID: "ga", SubAccountID: "sa", ServiceID: "svc", ServicePlanID: "plan",
			ServicePlanName: "aws", ShootName: "c-" + runtimeID, InstanceID: "inst-" + runtimeID, Region: "eu-west-1"},
		Kubeconfig: "apiVersion: v1\nkind: Config\n# " + runtimeID,
	}
	for _, name := range components {
		c.KymaConfig.Components = append(c.KymaConfig.Components, reconciler.Component{
			Component: name, Namespace: "kyma-system", Version: "2.20.0",
			Configuration: []reconciler.Configuration{
				{Key: "global.domainName", Value: runtimeID + ".kyma.example"},
				{Key: "limits.cpu", Value: 2},
				{Key: "oidc.clientSecret", Value: "s3cret", Secret: true},
			},
		})
	}
	return c
}

func TestConfigFromEnvironment(t *testing.T) {
	t.Setenv("APP_RECONCILER_URL", "http://reconciler.example")
	var cfg reconciler.Config
	require.NoError(t, envconfig.Process("APP", &cfg))
	assert.Equal(t, reconciler.Config{URL: "http://reconciler.example", Timeout: 10 * time.Second, Config: clientkit.Config{Calls: clientkittest.DefaultCalls},
		RetryInitialBackoff: 200 * time.Millisecond, RetryMaxBackoff: 10 * time.Second}, cfg)
	require.NoError(t, cfg.Validate())

	_, err := reconciler.New(reconciler.Config{})
	assert.ErrorContains(t, err, "APP_RECONCILER_URL is required")
	_, err = reconciler.New(reconciler.Config{URL: "reconciler.example"})
	assert.ErrorContains(t, err, "APP_RECONCILER_URL must be an absolute http(s) URL")
}

func TestClusterLifecycle(t *testing.T) {
	e := newEnv(t, 1, reconcilerstandin.Options{ReconcileTime: time.Minute, DeleteTime: time.Minute, FailingComponents: []string{"broken"}})
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)

	st, err := c.ApplyClusterConfig(ctx, cluster("rt-1", "istio", "serverless"))
	require.NoError(t, err)
	assert.Equal(t, &reconciler.State{Cluster: "rt-1", ClusterVersion: 1, ConfigurationVersion: 1,
		Status: reconciler.StatusReconcilePending, StatusURL: e.url + "/reconciler/v1/clusters/rt-1/status"}, st)

	again, err := c.ApplyClusterConfig(ctx, cluster("rt-1", "istio", "serverless"))
	require.NoError(t, err)
	assert.Equal(t, st, again, "the same configuration creates no new version")

	e.clock.Advance(time.Minute)
	st, err = c.GetStatus(ctx, "rt-1")
	require.NoError(t, err)
	assert.Equal(t, reconciler.StatusReconciling, st.Status)
	e.clock.Advance(time.Minute)
	st, err = c.GetStatus(ctx, "rt-1")
	require.NoError(t, err)
	assert.Equal(t, reconciler.StatusReady, st.Status)

	// an upgrade with a failing component ends in error; dropping it reconciles again
	st, err = c.ApplyClusterConfig(ctx, cluster("rt-1", "istio", "serverless", "broken"))
	require.NoError(t, err)
	assert.Equal(t, int64(2), st.ConfigurationVersion)
	assert.Equal(t, int64(1), st.ClusterVersion)
	e.clock.Advance(2 * time.Minute)
	st, err = c.GetStatus(ctx, "rt-1")
	require.NoError(t, err)
	assert.Equal(t, reconciler.StatusError, st.Status)
	_, err = c.ApplyClusterConfig(ctx, cluster("rt-1", "istio", "serverless"))
	require.NoError(t, err)
	e.clock.Advance(2 * time.Minute)
	st, err = c.GetStatus(ctx, "rt-1")
	require.NoError(t, err)
	assert.Equal(t, reconciler.StatusReady, st.Status)
	assert.Equal(t, int64(3), st.ConfigurationVersion)

	obj := e.object(t, "rt-1")
	assert.Equal(t, 3, obj.ConfigurationVersionsCreated)
	require.Len(t, obj.Components, 2)
	assert.Equal(t, []reconcilerstandin.Configuration{
		{Key: "global.domainName", Value: "rt-1.kyma.example"},
		{Key: "limits.cpu", Value: json.Number("2")},
		{Key: "oidc.clientSecret", Value: reconcilerstandin.Masked, Secret: true},
	}, obj.Components[0].Configuration)
	assert.Equal(t, "c-rt-1", obj.Metadata.ShootName)

	require.NoError(t, c.DeleteCluster(ctx, "rt-1"))
	st, err = c.GetStatus(ctx, "rt-1")
	require.NoError(t, err)
	assert.Equal(t, reconciler.StatusDeletePending, st.Status)
	require.NoError(t, c.DeleteCluster(ctx, "rt-1"), "deleting twice")
	e.clock.Advance(2 * time.Minute)
	st, err = c.GetStatus(ctx, "rt-1")
	require.NoError(t, err)
	assert.Equal(t, reconciler.StatusDeleted, st.Status)
	require.NoError(t, c.DeleteCluster(ctx, "rt-1"), "deleting a deleted cluster")

	require.NoError(t, c.DeleteCluster(ctx, "never-existed"), "deleting an unknown cluster succeeds")
	_, err = c.GetStatus(ctx, "never-existed")
	require.Error(t, err)
	assert.True(t, reconciler.IsNotFound(err))
	assert.False(t, reconciler.IsTemporary(err))
	assert.ErrorContains(t, err, `getting the reconciliation status of runtime "never-existed"`)
}

func TestIdempotentApplyUnderInjectedErrors(t *testing.T) {
	e := newEnv(t, 2026, reconcilerstandin.Options{})
	// Every call tries up to 100 times, as the step's durable retries would; the breaker is off, so
	// that a run of injected failures does not stop the calls this test makes.
	e.cfg.Calls.Attempts, e.cfg.Calls.BreakerThreshold = 100, -1
	require.NoError(t, e.sb.SetFaults(reconcilerstandin.Name, sandbox.Faults{ErrorRate: 0.3, LostResponseRate: 0.3}))
	c := e.client(t)
	ctx := sandboxtest.Context(t, 60*time.Second)

	for i := range 40 {
		id := fmt.Sprintf("runtime-%02d", i)
		st, err := c.ApplyClusterConfig(ctx, cluster(id, "istio"))
		require.NoError(t, err, id)
		assert.Equal(t, int64(1), st.ConfigurationVersion, id)
		assert.Equal(t, reconciler.StatusReady, st.Status, id)
	}
	snap := e.st.Snapshot()
	require.Len(t, snap.Clusters, 40)
	for _, o := range snap.Clusters {
		assert.Equal(t, 1, o.ConfigurationVersionsCreated, o.RuntimeID)
		assert.Equal(t, 1, o.Creations, o.RuntimeID)
	}
	stats, err := e.sb.Stats(reconcilerstandin.Name)
	require.NoError(t, err)
	assert.Greater(t, stats.Errors500+stats.Errors503, 5, "the retries were exercised: %+v", stats)

	// deleting them all under the same faults, twice, deletes each exactly once
	for _, o := range snap.Clusters {
		require.NoError(t, c.DeleteCluster(ctx, o.RuntimeID))
		require.NoError(t, c.DeleteCluster(ctx, o.RuntimeID))
		st, err := c.GetStatus(ctx, o.RuntimeID)
		require.NoError(t, err)
		assert.Equal(t, reconciler.StatusDeleted, st.Status)
	}
	for _, o := range e.st.Snapshot().Clusters {
		assert.Equal(t, reconciler.StatusDeleted, o.Status)
		assert.Equal(t, 1, o.ConfigurationVersionsCreated, o.RuntimeID)
	}
}

// A response lost after the Reconciler applied the configuration (a proxy answering 502) makes the
// client apply it again, which must not create a second configuration version.
func TestRetryAfterLostResponseCreatesNoNewVersion(t *testing.T) {
	e := newEnv(t, 5, reconcilerstandin.Options{})
	var mu sync.Mutex
	lost := 0
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		e.sb.ServeHTTP(rec, r)
		mu.Lock()
		defer mu.Unlock()
		if r.Method == http.MethodPost && lost < 2 {
			lost++
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(proxy.Close)
	e.cfg.URL = proxy.URL + "/reconciler"

	st, err := e.client(t).ApplyClusterConfig(sandboxtest.Context(t, 10*time.Second), cluster("rt-lost", "istio"))
	require.NoError(t, err)
	assert.Equal(t, int64(1), st.ConfigurationVersion)
	obj := e.object(t, "rt-lost")
	assert.Equal(t, 3, obj.Calls["apply"], "applied three times")
	assert.Equal(t, 1, obj.ConfigurationVersionsCreated)
}

func TestPermanentFailuresAreNotRetried(t *testing.T) {
	e := newEnv(t, 3, reconcilerstandin.Options{})
	c := e.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)

	bad := cluster("rt-bad", "istio")
	bad.Kubeconfig = ""
	_, err := c.ApplyClusterConfig(ctx, bad)
	require.Error(t, err)
	assert.False(t, reconciler.IsTemporary(err))
	var re *reconciler.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, http.StatusBadRequest, re.StatusCode)
	assert.Equal(t, 1, re.Attempts)
	assert.ErrorContains(t, err, `applying the cluster configuration of runtime "rt-bad"`)
	assert.ErrorContains(t, err, "kubeconfig is required")
	assert.Equal(t, 1, e.st.Snapshot().Calls["apply"])

	_, err = c.ApplyClusterConfig(ctx, cluster("rt-empty"))
	assert.ErrorContains(t, err, "kymaConfig.components must not be empty")
	assert.False(t, reconciler.IsTemporary(err))

	_, err = c.ApplyClusterConfig(ctx, cluster(""))
	assert.ErrorContains(t, err, "the runtime ID is empty")
	assert.False(t, reconciler.IsTemporary(err))
	_, err = c.GetStatus(ctx, " ")
	assert.ErrorContains(t, err, "the runtime ID is empty")
	assert.ErrorContains(t, c.DeleteCluster(ctx, ""), "the runtime ID is empty")
	assert.Equal(t, 2, e.st.Snapshot().Calls["apply"], "nothing sent without a runtime ID")
}

func TestOutageLongerThanDeadlineIsTemporary(t *testing.T) {
	e := newEnv(t, 4, reconcilerstandin.Options{})
	sandboxtest.Outage(t, e.sb, reconcilerstandin.Name)
	c := e.client(t)

	start := time.Now()
	_, err := c.ApplyClusterConfig(sandboxtest.Context(t, 300*time.Millisecond), cluster("rt-outage", "istio"))
	clientkittest.RequireGaveUp(t, err, start, 3)
	assert.True(t, reconciler.IsTemporary(err), "%v", err)
	assert.Empty(t, e.st.Snapshot().Clusters)

	require.NoError(t, e.sb.SetFaults(reconcilerstandin.Name, sandbox.Faults{}))
	_, err = c.ApplyClusterConfig(sandboxtest.Context(t, 5*time.Second), cluster("rt-outage", "istio"))
	require.NoError(t, err)
	assert.Equal(t, 1, e.object(t, "rt-outage").ConfigurationVersionsCreated)
}

func TestNetworkErrorsAreTemporary(t *testing.T) {
	addr := sandboxtest.ClosedAddr(t)

	c, err := reconciler.New(reconciler.Config{URL: "http://" + addr, RetryInitialBackoff: time.Millisecond, RetryMaxBackoff: 5 * time.Millisecond})
	require.NoError(t, err)
	err = c.DeleteCluster(sandboxtest.Context(t, 100*time.Millisecond), "rt-1")
	require.Error(t, err)
	assert.True(t, reconciler.IsTemporary(err), "%v", err)
	assert.ErrorContains(t, err, "after 3 attempt(s)", "bounded by its attempts, not by the deadline")
	assert.ErrorContains(t, err, `deleting the cluster of runtime "rt-1"`)
}
