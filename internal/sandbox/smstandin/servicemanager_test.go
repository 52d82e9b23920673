package smstandin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/smstandin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	emPlanID       = "0e4d7b2c-5a61-4f0e-9a3e-000000000a01"
	operatorPlanID = "0e4d7b2c-5a61-4f0e-9a3e-000000000a02"
	emOfferingID   = "0e4d7b2c-5a61-4f0e-9a3e-000000000e01"
)

type env struct {
	t     *testing.T
	st    *smstandin.Server
	url   string
	clock *sandboxtest.Clock
	token string
}

func newEnv(t *testing.T, delay time.Duration) *env {
	t.Helper()
	clock := sandboxtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return serve(t, clock, smstandin.New(options(clock, delay)))
}

func options(clock *sandboxtest.Clock, delay time.Duration) smstandin.Options {
	return smstandin.Options{ClientID: "id", ClientSecret: "secret", TokenTTL: time.Hour, ProvisionDelay: delay, Now: clock.Now}
}

// serve serves the stand-in and takes a token.
func serve(t *testing.T, clock *sandboxtest.Clock, st *smstandin.Server) *env {
	t.Helper()
	e := &env{t: t, clock: clock, st: st}
	_, e.url = sandboxtest.Serve(t, sandbox.Options{}, e.st)
	e.token = sandboxtest.Token(t, e.url+"/servicemanager/oauth/token", url.Values{"grant_type": {"client_credentials"}}, "id", "secret").AccessToken
	return e
}

// api calls path (with its query) under /servicemanager with the bearer token.
func (e *env) api(method, path, body string) (int, http.Header, string) {
	e.t.Helper()
	resp, b := sandboxtest.Send(e.t, sandboxtest.APIRequest(e.t, method, e.url+"/servicemanager"+path, e.token, body))
	return resp.StatusCode, resp.Header, b
}

func fq(q string) string { return "?fieldQuery=" + url.QueryEscape(q) }

func decodeInto[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal([]byte(body), &v), body)
	return v
}

func (e *env) createAsync(name string) (id, opPath string) {
	e.t.Helper()
	code, hdr, body := e.api(http.MethodPost, "/v1/service_instances?async=true",
		`{"name":"`+name+`","service_plan_id":"`+emPlanID+`","parameters":{"namespace":"kyma/ns/`+name+`"},"labels":{"runtime":["rt-1"]}}`)
	require.Equal(e.t, http.StatusAccepted, code, body)
	loc := hdr.Get("Location")
	rest, ok := strings.CutPrefix(loc, "/v1/service_instances/")
	require.True(e.t, ok, loc)
	id, _, found := strings.Cut(rest, "/operations/")
	require.True(e.t, found, loc)
	return id, loc
}

func TestTokenAndBearer(t *testing.T) {
	e := newEnv(t, 0)
	code, body := sandboxtest.PostForm(t, e.url+"/servicemanager/oauth/token", url.Values{"grant_type": {"client_credentials"}}, "id", "wrong")
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, body, "invalid_client")
	for _, auth := range []string{"", "Bearer nope"} {
		req := sandboxtest.Request(t, http.MethodGet, e.url+"/servicemanager/v1/service_offerings", "")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		code, _ := sandboxtest.Do(t, req)
		assert.Equal(t, http.StatusUnauthorized, code, auth)
	}
	code, _, _ = e.api(http.MethodGet, "/v1/service_offerings", "")
	assert.Equal(t, http.StatusOK, code)
	e.clock.Advance(2 * time.Hour)
	code, _, _ = e.api(http.MethodGet, "/v1/service_offerings", "")
	assert.Equal(t, http.StatusUnauthorized, code, "expired token")
	calls := e.st.Snapshot().Calls
	assert.Equal(t, 1, calls["token.rejected"])
	assert.Equal(t, 3, calls["unauthorized"])
}

func TestCatalog(t *testing.T) {
	e := newEnv(t, 0)
	code, _, body := e.api(http.MethodGet, "/v1/service_offerings", "")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, 2, decodeInto[smstandin.List[smstandin.Offering]](t, body).NumItems)

	code, _, body = e.api(http.MethodGet, "/v1/service_offerings"+fq("catalog_name eq 'enterprise-messaging'"), "")
	require.Equal(t, http.StatusOK, code)
	offerings := decodeInto[smstandin.List[smstandin.Offering]](t, body)
	require.Equal(t, 1, offerings.NumItems)
	assert.Equal(t, emOfferingID, offerings.Items[0].ID)

	code, _, body = e.api(http.MethodGet, "/v1/service_plans"+fq("catalog_name eq 'default' and service_offering_id eq '"+emOfferingID+"'"), "")
	require.Equal(t, http.StatusOK, code)
	plans := decodeInto[smstandin.List[smstandin.Plan]](t, body)
	require.Len(t, plans.Items, 1)
	assert.Equal(t, emPlanID, plans.Items[0].ID)

	code, _, body = e.api(http.MethodGet, "/v1/service_plans"+fq("catalog_name eq 'default' and service_offering_id eq 'other'"), "")
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"num_items":0,"items":[]}`, body)

	for path, msg := range map[string]string{
		"/v1/service_offerings" + fq("catalog_name ne 'x'"):               `unsupported operator \"ne\"`,
		"/v1/service_plans" + fq("broker_id eq 'x'"):                      `unsupported field \"broker_id\"`,
		"/v1/service_instances" + fq("name eq 'x"):                        "unterminated quoted value",
		"/v1/service_bindings" + fq("name eq 'x' or id eq 'y'"):           `expected \"and\"`,
		"/v1/service_instances?labelQuery=" + url.QueryEscape("a eq 'b'"): "labelQuery is not supported",
	} {
		code, _, body = e.api(http.MethodGet, path, "")
		assert.Equal(t, http.StatusBadRequest, code, path)
		assert.Contains(t, body, msg, path)
		assert.Contains(t, body, `"error":"BadRequest"`, path)
	}
}

func TestAsyncInstanceLifecycle(t *testing.T) {
	e := newEnv(t, time.Minute)
	id, opPath := e.createAsync("ems-1")

	code, _, body := e.api(http.MethodGet, opPath, "")
	require.Equal(t, http.StatusOK, code, body)
	op := decodeInto[smstandin.Operation](t, body)
	assert.Equal(t, smstandin.OperationCreate, op.Type)
	assert.Equal(t, smstandin.StateInProgress, op.State)
	assert.Equal(t, id, op.ResourceID)

	code, _, body = e.api(http.MethodGet, "/v1/service_instances/"+id, "")
	require.Equal(t, http.StatusOK, code)
	inst := decodeInto[smstandin.Instance](t, body)
	assert.False(t, inst.Ready)
	assert.Equal(t, "ems-1", inst.Name)
	assert.Equal(t, map[string][]string{"runtime": {"rt-1"}}, inst.Labels)
	require.NotNil(t, inst.LastOperation)
	assert.Equal(t, smstandin.StateInProgress, inst.LastOperation.State)

	bind := `{"name":"b-1","service_instance_id":"` + id + `","parameters":{}}`
	code, _, body = e.api(http.MethodPost, "/v1/service_bindings?async=false", bind)
	assert.Equal(t, http.StatusUnprocessableEntity, code, "binding an instance not ready: %s", body)
	code, _, body = e.api(http.MethodDelete, "/v1/service_instances/"+id+"?async=true", "")
	assert.Equal(t, http.StatusUnprocessableEntity, code, "deleting during the creation: %s", body)
	assert.Contains(t, body, "ConcurrentOperationInProgress")
	code, _, body = e.api(http.MethodPost, "/v1/service_instances?async=true", `{"name":"ems-1","service_plan_id":"`+emPlanID+`"}`)
	assert.Equal(t, http.StatusConflict, code, "a second instance of the same name: %s", body)

	e.clock.Advance(time.Minute)
	code, _, body = e.api(http.MethodGet, "/v1/service_instances"+fq("name eq 'ems-1'"), "")
	require.Equal(t, http.StatusOK, code)
	list := decodeInto[smstandin.List[smstandin.Instance]](t, body)
	require.Len(t, list.Items, 1)
	assert.True(t, list.Items[0].Ready)
	assert.True(t, list.Items[0].Usable)
	assert.Equal(t, smstandin.StateSucceeded, list.Items[0].LastOperation.State)
	code, _, body = e.api(http.MethodGet, opPath, "")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, smstandin.StateSucceeded, decodeInto[smstandin.Operation](t, body).State)

	code, _, body = e.api(http.MethodPost, "/v1/service_bindings?async=false", bind)
	require.Equal(t, http.StatusCreated, code, body)
	b := decodeInto[smstandin.Binding](t, body)
	assert.Equal(t, "b-1", b.Name)
	assert.Equal(t, id, b.ServiceInstanceID)
	assert.Equal(t, "kyma/ns/ems-1", b.Credentials["namespace"], "the namespace parameter of the instance")
	assert.Equal(t, id, b.Credentials["serviceinstanceid"])
	require.Len(t, b.Credentials["messaging"], 3)
	amqp := b.Credentials["messaging"].([]any)[0].(map[string]any)
	assert.Equal(t, []any{"amqp10ws"}, amqp["protocol"])
	assert.Equal(t, "client_credentials", amqp["oa2"].(map[string]any)["granttype"])
	code, _, _ = e.api(http.MethodPost, "/v1/service_bindings", bind)
	assert.Equal(t, http.StatusConflict, code, "a second binding of the same name")

	code, _, body = e.api(http.MethodGet, "/v1/service_bindings"+fq("name eq 'b-1' and service_instance_id eq '"+id+"'"), "")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, []smstandin.Binding{b}, decodeInto[smstandin.List[smstandin.Binding]](t, body).Items)
	code, _, body = e.api(http.MethodGet, "/v1/service_bindings/"+b.ID, "")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, b, decodeInto[smstandin.Binding](t, body))

	code, _, body = e.api(http.MethodDelete, "/v1/service_instances/"+id+"?async=true", "")
	assert.Equal(t, http.StatusConflict, code, "an instance with bindings: %s", body)
	code, _, _ = e.api(http.MethodDelete, "/v1/service_bindings/"+b.ID, "")
	assert.Equal(t, http.StatusOK, code)
	code, _, _ = e.api(http.MethodDelete, "/v1/service_bindings/"+b.ID, "")
	assert.Equal(t, http.StatusNotFound, code)

	code, hdr, _ := e.api(http.MethodDelete, "/v1/service_instances/"+id+"?async=true", "")
	require.Equal(t, http.StatusAccepted, code)
	deleteOp := hdr.Get("Location")
	code, _, body = e.api(http.MethodGet, "/v1/service_instances/"+id, "")
	require.Equal(t, http.StatusOK, code, "still there while being deleted")
	inst = decodeInto[smstandin.Instance](t, body)
	assert.Equal(t, smstandin.OperationDelete, inst.LastOperation.Type)
	assert.Equal(t, smstandin.StateInProgress, inst.LastOperation.State)
	code, _, _ = e.api(http.MethodPost, "/v1/service_bindings", bind)
	assert.Equal(t, http.StatusUnprocessableEntity, code, "binding an instance being deleted")

	e.clock.Advance(time.Minute)
	code, _, _ = e.api(http.MethodGet, "/v1/service_instances/"+id, "")
	assert.Equal(t, http.StatusNotFound, code)
	code, _, body = e.api(http.MethodGet, deleteOp, "")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, smstandin.StateSucceeded, decodeInto[smstandin.Operation](t, body).State)
	code, _, _ = e.api(http.MethodGet, "/v1/service_instances/other/operations/"+strings.TrimPrefix(deleteOp, "/v1/service_instances/"+id+"/operations/"), "")
	assert.Equal(t, http.StatusNotFound, code, "an operation of another instance")
	code, _, _ = e.api(http.MethodDelete, "/v1/service_instances/"+id+"?async=true", "")
	assert.Equal(t, http.StatusNotFound, code)

	snap := e.st.Snapshot()
	assert.Empty(t, snap.Instances)
	assert.Empty(t, snap.Bindings)
	assert.Equal(t, map[string]int{"ems-1": 1}, snap.InstanceCreatesByName)
	assert.Equal(t, map[string]int{"ems-1": 1}, snap.InstanceDeletesByName)
	assert.Equal(t, map[string]int{"b-1": 1}, snap.BindingCreatesByName)
	assert.Equal(t, map[string]int{"b-1": 1}, snap.BindingDeletesByName)
	assert.Equal(t, 4, snap.Calls["createBinding"])
	assert.Equal(t, 4, snap.Calls["deleteInstance"])
}

func TestSynchronousRequestsFinishAtOnce(t *testing.T) {
	e := newEnv(t, time.Hour)
	code, _, body := e.api(http.MethodPost, "/v1/service_instances", `{"name":"sync","service_plan_id":"`+emPlanID+`"}`)
	require.Equal(t, http.StatusCreated, code, body)
	inst := decodeInto[smstandin.Instance](t, body)
	assert.True(t, inst.Ready)
	assert.Equal(t, smstandin.StateSucceeded, inst.LastOperation.State)

	code, _, body = e.api(http.MethodPost, "/v1/service_bindings", `{"name":"b","service_instance_id":"`+inst.ID+`"}`)
	require.Equal(t, http.StatusCreated, code, body)
	b := decodeInto[smstandin.Binding](t, body)

	snap := e.st.Snapshot()
	require.Len(t, snap.Instances, 1)
	assert.Equal(t, []string{b.ID}, snap.Instances[0].Bindings)
	assert.Equal(t, map[string]int{"create": 1, "bind": 1}, snap.Instances[0].Calls)
	require.Len(t, snap.Bindings, 1)
	assert.Equal(t, map[string]int{"create": 1}, snap.Bindings[0].Calls)

	code, _, _ = e.api(http.MethodDelete, "/v1/service_bindings/"+b.ID, "")
	require.Equal(t, http.StatusOK, code)
	code, _, body = e.api(http.MethodDelete, "/v1/service_instances/"+inst.ID, "")
	require.Equal(t, http.StatusOK, code, body)
	code, _, _ = e.api(http.MethodGet, "/v1/service_instances/"+inst.ID, "")
	assert.Equal(t, http.StatusNotFound, code)
}

func TestZeroDelayAnswersAsyncButIsDone(t *testing.T) {
	e := newEnv(t, 0)
	id, opPath := e.createAsync("quick")
	code, _, body := e.api(http.MethodGet, opPath, "")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, smstandin.StateSucceeded, decodeInto[smstandin.Operation](t, body).State)
	code, _, body = e.api(http.MethodGet, "/v1/service_instances/"+id, "")
	require.Equal(t, http.StatusOK, code)
	assert.True(t, decodeInto[smstandin.Instance](t, body).Ready)
	code, _, _ = e.api(http.MethodDelete, "/v1/service_instances/"+id+"?async=true", "")
	require.Equal(t, http.StatusAccepted, code)
	code, _, _ = e.api(http.MethodGet, "/v1/service_instances/"+id, "")
	assert.Equal(t, http.StatusNotFound, code)
}

func TestValidation(t *testing.T) {
	e := newEnv(t, 0)
	for body, msg := range map[string]string{
		`{"service_plan_id":"` + emPlanID + `"}`:                               "name: missing",
		`{"name":"a"}`:                                                         "service_plan_id: missing",
		`{"name":"a","service_plan_id":"nope"}`:                                `service_plan_id: plan \"nope\" not found`,
		`{"name":"a","service_plan_id":"` + emPlanID + `","plan":"x"}`:         `unknown field \"plan\"`,
		`{"name":"a","service_plan_id":"` + emPlanID + `","labels":{"k":"v"}}`: "labels",
		`{"name":"a","service_plan_id":"` + emPlanID + `","labels":{"k":[]}}`:  "labels: label k has no values",
		`{"name":"a","service_plan_id":"` + emPlanID + `","parameters":"x"}`:   "parameters",
		`{"name":`: "invalid request body",
	} {
		code, _, resp := e.api(http.MethodPost, "/v1/service_instances?async=true", body)
		assert.Equal(t, http.StatusBadRequest, code, body)
		assert.Contains(t, resp, msg, body)
	}
	code, _, resp := e.api(http.MethodPost, "/v1/service_instances?async=maybe", `{"name":"a","service_plan_id":"`+emPlanID+`"}`)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, resp, "async")

	for body, msg := range map[string]string{
		`{"service_instance_id":"x"}`: "name: missing",
		`{"name":"b"}`:                "service_instance_id: missing",
		`{"name":"b","service_instance_id":"x","credentials":{}}`: `unknown field \"credentials\"`,
	} {
		code, _, resp := e.api(http.MethodPost, "/v1/service_bindings", body)
		assert.Equal(t, http.StatusBadRequest, code, body)
		assert.Contains(t, resp, msg, body)
	}
	code, _, _ = e.api(http.MethodPost, "/v1/service_bindings", `{"name":"b","service_instance_id":"missing"}`)
	assert.Equal(t, http.StatusNotFound, code)
	code, _, _ = e.api(http.MethodGet, "/v1/service_instances/missing", "")
	assert.Equal(t, http.StatusNotFound, code)
	code, _, _ = e.api(http.MethodGet, "/v1/service_bindings/missing", "")
	assert.Equal(t, http.StatusNotFound, code)

	snap := e.st.Snapshot()
	assert.Empty(t, snap.InstanceCreatesByName)
	assert.Empty(t, snap.BindingCreatesByName)
	assert.Equal(t, 9, snap.Calls["createInstance"])
}

func TestServiceOperatorAccessBinding(t *testing.T) {
	e := newEnv(t, 0)
	code, _, body := e.api(http.MethodPost, "/v1/service_instances", `{"name":"operator","service_plan_id":"`+operatorPlanID+`"}`)
	require.Equal(t, http.StatusCreated, code, body)
	inst := decodeInto[smstandin.Instance](t, body)
	code, _, body = e.api(http.MethodPost, "/v1/service_bindings", `{"name":"operator","service_instance_id":"`+inst.ID+`"}`)
	require.Equal(t, http.StatusCreated, code, body)
	creds := decodeInto[smstandin.Binding](t, body).Credentials
	assert.Equal(t, "id", creds["clientid"])
	assert.Equal(t, "secret", creds["clientsecret"])
	assert.Equal(t, e.url+"/servicemanager", creds["sm_url"])
	assert.Equal(t, e.url+"/servicemanager", creds["url"])
}

func TestConcurrentCreatesOfOneName(t *testing.T) {
	e := newEnv(t, 0)
	codes := make(chan int, 20)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			code, _, _ := e.api(http.MethodPost, "/v1/service_instances?async=true", `{"name":"same","service_plan_id":"`+emPlanID+`"}`)
			codes <- code
		})
	}
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	assert.Equal(t, map[int]int{http.StatusAccepted: 1, http.StatusConflict: 19}, count)
	assert.Equal(t, map[string]int{"same": 1}, e.st.Snapshot().InstanceCreatesByName)
}

func TestResetKeepsCatalogAndTokens(t *testing.T) {
	e := newEnv(t, 0)
	e.createAsync("gone")
	require.NoError(t, e.st.Reset(context.Background()))
	snap := e.st.Snapshot()
	assert.Empty(t, snap.Instances)
	assert.Empty(t, snap.InstanceCreatesByName)
	code, _, body := e.api(http.MethodGet, "/v1/service_plans"+fq("catalog_name eq 'service-operator-access'"), "")
	require.Equal(t, http.StatusOK, code, "the token survives")
	assert.Equal(t, 1, decodeInto[smstandin.List[smstandin.Plan]](t, body).NumItems)
}

func TestStateSurvivesARestart(t *testing.T) {
	store := durable.NewMemoryStore()
	clock := sandboxtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func(ctx context.Context, store durable.Store) (*smstandin.Server, error) {
		o := options(clock, time.Minute)
		o.Store = store
		return smstandin.Open(ctx, o)
	}
	e := serve(t, clock, sandboxtest.Open(t, open, store))
	ready, _ := e.createAsync("ready")
	clock.Advance(time.Minute)
	code, _, body := e.api(http.MethodPost, "/v1/service_bindings", `{"name":"b-1","service_instance_id":"`+ready+`"}`)
	require.Equal(t, http.StatusCreated, code, body)
	binding := decodeInto[smstandin.Binding](t, body)
	pending, opPath := e.createAsync("pending")
	gone, _ := e.createAsync("gone")
	clock.Advance(time.Minute)
	code, _, body = e.api(http.MethodDelete, "/v1/service_instances/"+gone+"?async=true", "")
	require.Equal(t, http.StatusAccepted, code, body)
	clock.Advance(30 * time.Second)
	e.createAsync("new")

	restarted := sandboxtest.Reopen(t, open, store, e.st.Snapshot())
	e2 := serve(t, clock, restarted)
	code, _, body = e2.api(http.MethodGet, "/v1/service_bindings/"+binding.ID, "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, binding.Credentials, decodeInto[smstandin.Binding](t, body).Credentials)
	code, _, body = e2.api(http.MethodGet, opPath, "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, smstandin.StateSucceeded, decodeInto[smstandin.Operation](t, body).State)
	code, _, _ = e2.api(http.MethodGet, "/v1/service_instances/"+gone, "")
	assert.Equal(t, http.StatusOK, code, "the deletion is still in progress")
	clock.Advance(time.Minute)
	code, _, _ = e2.api(http.MethodGet, "/v1/service_instances/"+gone, "")
	assert.Equal(t, http.StatusNotFound, code, "the deletion went on after the restart")
	code, _, body = e2.api(http.MethodGet, "/v1/service_instances/"+pending, "")
	require.Equal(t, http.StatusOK, code, body)
	assert.True(t, decodeInto[smstandin.Instance](t, body).Ready)
	snap := e2.st.Snapshot()
	assert.Equal(t, map[string]int{"ready": 1, "pending": 1, "gone": 1, "new": 1}, snap.InstanceCreatesByName)
	assert.Equal(t, map[string]int{"gone": 1}, snap.InstanceDeletesByName)
	assert.Equal(t, map[string]int{"b-1": 1}, snap.BindingCreatesByName)

	restarted = sandboxtest.Reopen(t, open, store, snap)
	code, _, body = serve(t, clock, restarted).api(http.MethodGet, opPath, "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, smstandin.StateSucceeded, decodeInto[smstandin.Operation](t, body).State, "the finished operation was saved")
	sandboxtest.RequireResetIsDurable(t, restarted, open, store)
}
