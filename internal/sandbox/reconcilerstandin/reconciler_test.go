package reconcilerstandin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/reconcilerstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const base = "/reconciler/v1/clusters"

type env struct {
	t     *testing.T
	st    *reconcilerstandin.Server
	url   string
	clock *sandboxtest.Clock
}

func newEnv(t *testing.T, opts reconcilerstandin.Options) *env {
	t.Helper()
	clock := sandboxtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts.Now = clock.Now
	return serve(t, clock, reconcilerstandin.New(opts))
}

func serve(t *testing.T, clock *sandboxtest.Clock, st *reconcilerstandin.Server) *env {
	t.Helper()
	e := &env{t: t, clock: clock, st: st}
	_, e.url = sandboxtest.Serve(t, sandbox.Options{}, e.st)
	return e
}

func (e *env) api(method, path, body string) (int, string) {
	e.t.Helper()
	return sandboxtest.Do(e.t, sandboxtest.APIRequest(e.t, method, e.url+base+path, "", body))
}

func (e *env) state(method, path, body string) reconcilerstandin.State {
	e.t.Helper()
	code, out := e.api(method, path, body)
	require.Equal(e.t, http.StatusOK, code, out)
	var st reconcilerstandin.State
	require.NoError(e.t, json.Unmarshal([]byte(out), &st))
	return st
}

func (e *env) status(id string) string {
	e.t.Helper()
	return e.state(http.MethodGet, "/"+id+"/status", "").Status
}

// body is a cluster configuration with the given components, each with a plain and a secret entry.
func body(id string, components ...string) string {
	c := reconcilerstandin.Cluster{
		RuntimeID:    id,
		RuntimeInput: reconcilerstandin.RuntimeInput{Name: "rt-" + id, Description: "d"},
		KymaConfig:   reconcilerstandin.KymaConfig{Version: "2.20.0", Profile: "production", Administrators: []string{"admin@example.com"}},
		Metadata:     reconcilerstandin.Metadata{GlobalAccountID: "ga", SubAccountID: "sa", InstanceID: "inst-" + id, Region: "eu-west-1"},
		Kubeconfig:   "apiVersion: v1\nkind: Config\n",
	}
	for _, name := range components {
		c.KymaConfig.Components = append(c.KymaConfig.Components, reconcilerstandin.Component{
			Component: name, Namespace: "kyma-system", Version: "2.20.0",
			Configuration: []reconcilerstandin.Configuration{{Key: "replicas", Value: 2}, {Key: "password", Value: "hunter2", Secret: true}},
		})
	}
	b, _ := json.Marshal(c)
	return string(b)
}

func TestValidation(t *testing.T) {
	e := newEnv(t, reconcilerstandin.Options{})
	for field, in := range map[string]string{
		"runtimeID is required":                            strings.Replace(body("x", "istio"), `"runtimeID":"x"`, `"runtimeID":""`, 1),
		"kubeconfig is required":                           strings.Replace(body("x", "istio"), `"kubeconfig":"apiVersion: v1\nkind: Config\n"`, `"kubeconfig":""`, 1),
		"kymaConfig.version is required":                   strings.Replace(body("x", "istio"), `"version":"2.20.0"`, `"version":""`, 1),
		"kymaConfig.components must not be empty":          body("x"),
		"kymaConfig.components[0].component is required":   body("x", ""),
		"kymaConfig.components[0].configuration[0].key is": strings.Replace(body("x", "istio"), `"key":"replicas"`, `"key":""`, 1),
		"invalid JSON":                                     `{"runtimeID":`,
	} {
		code, out := e.api(http.MethodPost, "", in)
		assert.Equal(t, http.StatusBadRequest, code, field)
		assert.Contains(t, out, field)
		assert.Contains(t, out, `"error"`, "the mothership's error shape")
	}
	code, out := e.api(http.MethodPut, "", body("unknown", "istio"))
	assert.Equal(t, http.StatusNotFound, code, "PUT updates only: %s", out)
	code, _ = e.api(http.MethodGet, "/unknown/status", "")
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = e.api(http.MethodDelete, "/unknown", "")
	assert.Equal(t, http.StatusNotFound, code)

	snap := e.st.Snapshot()
	assert.Empty(t, snap.Clusters)
	assert.Equal(t, 7, snap.Calls["apply.invalid"])
	assert.Equal(t, 8, snap.Calls["apply"])
}

func TestReconcileAndDeleteProgressWithTime(t *testing.T) {
	e := newEnv(t, reconcilerstandin.Options{ReconcileTime: time.Minute, DeleteTime: 30 * time.Second})
	st := e.state(http.MethodPost, "", body("rt1", "istio", "serverless"))
	assert.Equal(t, reconcilerstandin.State{Cluster: "rt1", ClusterVersion: 1, ConfigurationVersion: 1, Status: reconcilerstandin.StatusReconcilePending,
		StatusURL: e.url + "/reconciler/v1/clusters/rt1/status"}, st)

	e.clock.Advance(59 * time.Second)
	assert.Equal(t, reconcilerstandin.StatusReconcilePending, e.status("rt1"))
	e.clock.Advance(time.Second)
	assert.Equal(t, reconcilerstandin.StatusReconciling, e.status("rt1"))
	e.clock.Advance(time.Minute)
	assert.Equal(t, reconcilerstandin.StatusReady, e.status("rt1"))

	// the same configuration again: no new version, still ready
	st = e.state(http.MethodPost, "", body("rt1", "istio", "serverless"))
	assert.Equal(t, int64(1), st.ConfigurationVersion)
	assert.Equal(t, reconcilerstandin.StatusReady, st.Status)

	// a changed configuration reconciles again; the cluster itself did not change
	st = e.state(http.MethodPut, "", body("rt1", "istio"))
	assert.Equal(t, int64(2), st.ConfigurationVersion)
	assert.Equal(t, int64(1), st.ClusterVersion)
	assert.Equal(t, reconcilerstandin.StatusReconcilePending, st.Status)
	// a new kubeconfig is a new cluster version
	st = e.state(http.MethodPost, "", strings.Replace(body("rt1", "istio"), "kind: Config", "kind: Config\\ncurrent-context: x", 1))
	assert.Equal(t, int64(3), st.ConfigurationVersion)
	assert.Equal(t, int64(2), st.ClusterVersion)
	e.clock.Advance(2 * time.Minute)
	assert.Equal(t, reconcilerstandin.StatusReady, e.status("rt1"))

	st = e.state(http.MethodDelete, "/rt1", "")
	assert.Equal(t, reconcilerstandin.StatusDeletePending, st.Status)
	e.clock.Advance(30 * time.Second)
	assert.Equal(t, reconcilerstandin.StatusDeleting, e.status("rt1"))
	st = e.state(http.MethodDelete, "/rt1", "")
	assert.Equal(t, reconcilerstandin.StatusDeleting, st.Status, "a second delete does not restart the deletion")
	e.clock.Advance(30 * time.Second)
	assert.Equal(t, reconcilerstandin.StatusDeleted, e.status("rt1"))
	e.clock.Advance(time.Hour)
	assert.Equal(t, reconcilerstandin.StatusDeleted, e.status("rt1"), "a deleted cluster is still known")
	assert.Equal(t, reconcilerstandin.StatusDeleted, e.state(http.MethodDelete, "/rt1", "").Status)

	// a new apply of the same configuration starts over
	st = e.state(http.MethodPost, "", strings.Replace(body("rt1", "istio"), "kind: Config", "kind: Config\\ncurrent-context: x", 1))
	assert.Equal(t, reconcilerstandin.StatusReconcilePending, st.Status)
	assert.Equal(t, int64(4), st.ConfigurationVersion)
	assert.Equal(t, int64(3), st.ClusterVersion)

	snap := e.st.Snapshot()
	require.Len(t, snap.Clusters, 1)
	obj := snap.Clusters[0]
	assert.Equal(t, reconcilerstandin.StatusReconcilePending, obj.Status)
	assert.Equal(t, 4, obj.ConfigurationVersionsCreated)
	assert.Equal(t, 2, obj.Creations)
	assert.Equal(t, map[string]int{"apply": 5, "status": 7, "delete": 3}, obj.Calls)
}

func TestZeroTimesAndFailingComponents(t *testing.T) {
	e := newEnv(t, reconcilerstandin.Options{FailingComponents: []string{"broken"}})
	assert.Equal(t, reconcilerstandin.StatusReady, e.state(http.MethodPost, "", body("ok", "istio")).Status, "ready at once")
	assert.Equal(t, reconcilerstandin.StatusError, e.state(http.MethodPost, "", body("bad", "istio", "broken")).Status)
	assert.Equal(t, reconcilerstandin.StatusError, e.state(http.MethodPost, "", body("bad", "istio", "broken")).Status, "the same configuration stays in error")
	st := e.state(http.MethodPost, "", body("bad", "istio"))
	assert.Equal(t, reconcilerstandin.StatusReady, st.Status, "a configuration without the failing component reconciles")
	assert.Equal(t, int64(2), st.ConfigurationVersion)
	assert.Equal(t, reconcilerstandin.StatusDeleted, e.state(http.MethodDelete, "/ok", "").Status, "deleted at once")
}

func TestObjectsHideSecrets(t *testing.T) {
	e := newEnv(t, reconcilerstandin.Options{})
	e.state(http.MethodPost, "", body("rt1", "istio"))
	code, out := sandboxtest.Do(t, sandboxtest.Request(t, http.MethodGet, e.url+"/_sandbox/reconciler/objects", ""))
	require.Equal(t, http.StatusOK, code)
	assert.NotContains(t, out, "hunter2")
	assert.NotContains(t, out, "apiVersion")
	assert.Contains(t, out, `"value":2`, "plain values are shown as sent")

	obj := e.st.Snapshot().Clusters[0]
	assert.Equal(t, reconcilerstandin.Masked, obj.Components[0].Configuration[1].Value)
	assert.Equal(t, len("apiVersion: v1\nkind: Config\n"), obj.Kubeconfig.Length)
	assert.Len(t, obj.Kubeconfig.SHA256, 16)
	assert.Equal(t, "2.20.0", obj.KymaVersion)
	assert.Equal(t, []string{"admin@example.com"}, obj.Administrators)
	assert.Equal(t, "inst-rt1", obj.Metadata.InstanceID)

	require.NoError(t, e.st.Reset(context.Background()))
	assert.Empty(t, e.st.Snapshot().Clusters)
	code, _ = e.api(http.MethodGet, "/rt1/status", "")
	assert.Equal(t, http.StatusNotFound, code)
}

func TestEqualConfigurationsCompareByValue(t *testing.T) {
	e := newEnv(t, reconcilerstandin.Options{})
	in := `{"runtimeID":"n","kubeconfig":"k","kymaConfig":{"version":"2","administrators":[],"components":[{"URL":"","version":"2","component":"c","namespace":"ns","configuration":[{"key":"a","value":10000000000000001}]}]}}`
	same := `{"kymaConfig":{"components":[{"configuration":[{"value":10000000000000001,"key":"a"}],"namespace":"ns","component":"c","version":"2","URL":""}],"version":"2","administrators":[]},"kubeconfig":"k","runtimeID":"n"}`
	assert.Equal(t, int64(1), e.state(http.MethodPost, "", in).ConfigurationVersion)
	assert.Equal(t, int64(1), e.state(http.MethodPost, "", same).ConfigurationVersion, "key order does not matter")
	changed := strings.Replace(in, "10000000000000001", "10000000000000002", 1)
	assert.Equal(t, int64(2), e.state(http.MethodPost, "", changed).ConfigurationVersion, "large numbers compare exactly")
}

func TestStateSurvivesARestart(t *testing.T) {
	store := durable.NewMemoryStore()
	clock := sandboxtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func(ctx context.Context, store durable.Store) (*reconcilerstandin.Server, error) {
		return reconcilerstandin.Open(ctx, reconcilerstandin.Options{ReconcileTime: time.Minute, DeleteTime: time.Minute, Now: clock.Now, Store: store})
	}
	e := serve(t, clock, sandboxtest.Open(t, open, store))
	in := `{"runtimeID":"rt1","kubeconfig":"k","kymaConfig":{"version":"2","administrators":[],"components":[{"URL":"","version":"2","component":"c","namespace":"ns","configuration":[{"key":"a","value":10000000000000001}]}]}}`
	assert.Equal(t, reconcilerstandin.StatusReconcilePending, e.state(http.MethodPost, "", in).Status)
	e.state(http.MethodPost, "", strings.Replace(in, "rt1", "rt2", 1))
	e.state(http.MethodDelete, "/rt2", "")
	e.api(http.MethodPost, "", `{`)
	clock.Advance(90 * time.Second)

	restarted := sandboxtest.Reopen(t, open, store, e.st.Snapshot())
	e2 := serve(t, clock, restarted)
	assert.Equal(t, reconcilerstandin.StatusReconciling, e2.status("rt1"), "the reconciliation goes on from where it was")
	assert.Equal(t, reconcilerstandin.StatusDeleting, e2.status("rt2"))
	assert.Equal(t, int64(1), e2.state(http.MethodPost, "", in).ConfigurationVersion, "the same configuration, exact numbers included")
	clock.Advance(time.Hour)
	assert.Equal(t, reconcilerstandin.StatusReady, e2.status("rt1"))
	snap := e2.st.Snapshot()
	assert.Equal(t, 1, snap.Calls["apply.invalid"])
	assert.Equal(t, map[string]int{"apply": 2, "status": 2}, snap.Clusters[0].Calls)

	sandboxtest.RequireResetIsDurable(t, e2.st, open, store)
}

// The stand-in refuses what the mothership's OpenAPI refuses (schemas component and
// configuration; see internal/clients/reconciler/testdata/contract.json).
func TestContractRefusals(t *testing.T) {
	e := newEnv(t, reconcilerstandin.Options{})
	for want, in := range map[string]string{
		"kymaConfig.components[0].URL is required":                  strings.Replace(body("x", "istio"), `"URL":"",`, ``, 1),
		"kymaConfig.components[0].URL must be an absolute URI":      strings.Replace(body("x", "istio"), `"URL":""`, `"URL":"charts/istio"`, 1),
		"kymaConfig.components[0].version is required":              strings.Replace(body("x", "istio"), `,"version":"2.20.0","configuration"`, `,"configuration"`, 1),
		"kymaConfig.components[0].configuration[0].value must be a": strings.Replace(body("x", "istio"), `"value":2`, `"value":{"cpu":2}`, 1),
		"kymaConfig.components[0].configuration[1].value must be a": strings.Replace(body("x", "istio"), `"value":"hunter2"`, `"value":["a"]`, 1),
		"kymaConfig.administrators is required":                     strings.Replace(body("x", "istio"), `"administrators":["admin@example.com"]`, `"administrators":null`, 1),
	} {
		code, out := e.api(http.MethodPost, "", in)
		assert.Equal(t, http.StatusBadRequest, code, want)
		assert.Contains(t, out, want)
	}
	assert.Empty(t, e.st.Snapshot().Clusters)
	code, out := e.api(http.MethodPost, "", strings.Replace(body("x", "istio"), `"URL":""`, `"URL":"https://example.com/istio.tgz"`, 1))
	assert.Equal(t, http.StatusOK, code, out)
}

// A retryable component makes reconciliation and deletion each pass through their retryable
// error status before the Reconciler's own retry succeeds.
func TestRetryableErrors(t *testing.T) {
	e := newEnv(t, reconcilerstandin.Options{ReconcileTime: time.Minute, DeleteTime: time.Minute, RetryableComponents: []string{"flaky"}})
	e.state(http.MethodPost, "", body("rt", "istio", "flaky"))
	for _, want := range []string{reconcilerstandin.StatusReconcilePending, reconcilerstandin.StatusReconciling,
		reconcilerstandin.StatusReconcileErrorRetryable, reconcilerstandin.StatusReconciling, reconcilerstandin.StatusReady} {
		assert.Equal(t, want, e.status("rt"))
		e.clock.Advance(time.Minute)
	}
	e.state(http.MethodDelete, "/rt", "")
	for _, want := range []string{reconcilerstandin.StatusDeletePending, reconcilerstandin.StatusDeleting,
		reconcilerstandin.StatusDeleteErrorRetryable, reconcilerstandin.StatusDeleting, reconcilerstandin.StatusDeleted} {
		assert.Equal(t, want, e.status("rt"))
		e.clock.Advance(time.Minute)
	}
}
