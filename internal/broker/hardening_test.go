package broker_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Regression tests of the defects a hostile client found (issue 10), through the HTTP API.

// Control characters in a context ID reached an HTTP header in the provisioner and hung a
// worker; an instance ID of 100k characters failed only later, at AVS.
func TestHostileIDsAreRefusedNamingTheField(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	for _, bad := range []string{"ga\x00x", "ga\nx", "ga\x1b[31m", strings.Repeat("g", 257)} {
		for _, field := range []string{"globalaccount_id", "subaccount_id", "user_id"} {
			ctx := bt.SAPContext("ga-hostile", "sa-hostile")
			ctx[field] = bad
			id := newID()
			r := b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt"), ctx))
			requireStatus(t, http.StatusBadRequest, r)
			assert.Contains(t, r.Description(), "context."+field, "%q", bad)
			assert.Empty(t, b.Operations(id), "a refused request stores nothing")
		}
	}
	body := bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt"), bt.SAPContext("ga", "sa"))
	for _, id := range []string{strings.Repeat("i", 100_000), "a%20b", "a%00b", "a%0Ab", "%E2%98%83"} {
		r := b.Put(bt.InstancePath(id), body)
		requireStatus(t, http.StatusBadRequest, r)
		assert.Contains(t, r.Description(), "instance_id", "%.40s", id)
	}
	id := newID()
	r := b.Put("/v2/service_instances/"+id+"/service_bindings/"+strings.Repeat("b", 129), map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSPlanID})
	requireStatus(t, http.StatusBadRequest, r)
	assert.Contains(t, r.Description(), "binding_id")
	r = b.Get(bt.LastOperationPath(id, "op%0Ax"))
	requireStatus(t, http.StatusBadRequest, r)
	assert.Contains(t, r.Description(), "operation")
	// Updates check the context too.
	b.Provision(id, "rt-upd-ctx", "ga-upd-ctx")
	r = b.Patch(bt.InstancePath(id), map[string]any{"service_id": bt.ServiceID, "context": map[string]any{"globalaccount_id": "ga\x00"}})
	requireStatus(t, http.StatusBadRequest, r)
	assert.Contains(t, r.Description(), "context.globalaccount_id")
}

// "context": null with Cloud Foundry's organization_guid and space_guid panicked (nil map).
func TestNullContextWithCloudFoundryFields(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	r := b.Put(bt.InstancePath(newID()), `{"service_id":"`+bt.ServiceID+`","plan_id":"`+bt.AWSPlanID+`","organization_guid":"org-1","space_guid":"space-1","context":null,"parameters":{"name":"cf","region":"eu-central-1"}}`)
	requireStatus(t, http.StatusAccepted, r)
}

// A valid 100 MB body was accepted and grew the broker by 700 MB.
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	huge := `{"service_id":"` + bt.ServiceID + `","plan_id":"` + bt.AWSPlanID + `","context":{"globalaccount_id":"g","subaccount_id":"s","pad":"` + strings.Repeat("x", 2<<20) + `"},"parameters":{"name":"n","region":"eu-central-1"}}`
	id := newID()
	r := b.Put(bt.InstancePath(id), huge)
	requireStatus(t, http.StatusRequestEntityTooLarge, r)
	assert.Contains(t, r.Description(), "larger than")
	// Without a Content-Length (chunked), the limit holds while reading.
	req := bt.NewRequest(t, http.MethodPut, b.URL+bt.InstancePath(id), nil)
	req.Body, req.ContentLength = io.NopCloser(strings.NewReader(huge)), -1
	resp, err := b.Client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Empty(t, b.Operations(id))
	// The operator API too.
	r = b.Do(http.MethodPost, "/upgrade/kyma", `{"targets":{"include":[{"target":"all"}]},"kyma":{"version":"`+strings.Repeat("9", 2<<20)+`"}}`)
	requireStatus(t, http.StatusRequestEntityTooLarge, r)
}

// OSB 2.17: a repeated identical PATCH while that update runs MUST get 202 with the same
// operation (it answered 422).
func TestRepeatedUpdateGetsTheRunningOperation(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	id := newID()
	b.FinishOperation(b.Provision(id, "rt-repeat", "ga-repeat"), "succeeded")
	body := map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSHAPlanID, "parameters": map[string]any{"autoScalerMax": 30}}
	first := b.Patch(bt.InstancePath(id), body)
	requireStatus(t, http.StatusAccepted, first)
	again := b.Patch(bt.InstancePath(id), body)
	requireStatus(t, http.StatusAccepted, again)
	assert.Equal(t, first.Operation(), again.Operation())
	// Another change while it runs is still a conflict.
	r := b.Patch(bt.InstancePath(id), map[string]any{"service_id": bt.ServiceID, "parameters": map[string]any{"autoScalerMax": 25}})
	requireStatus(t, http.StatusUnprocessableEntity, r)
	assert.Contains(t, string(r.Body), "ConcurrencyError")
	assert.Len(t, b.Operations(id), 2, "the provisioning and one update")
}

// DELETE with a service_id or plan_id that is not the instance's deprovisioned it anyway.
func TestDeprovisionChecksServiceAndPlan(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	id := newID()
	b.FinishOperation(b.Provision(id, "rt-del", "ga-del"), "succeeded")
	r := b.Delete(bt.DeprovisionPath(id, bt.GCPPlanID))
	requireStatus(t, http.StatusBadRequest, r)
	assert.Contains(t, r.Description(), "plan_id")
	r = b.Delete(bt.InstancePath(id) + "&service_id=not-kyma&plan_id=" + bt.AWSPlanID)
	requireStatus(t, http.StatusBadRequest, r)
	assert.Contains(t, r.Description(), "service_id")
	assert.Len(t, b.Operations(id), 1, "no deprovisioning started")
	requireStatus(t, http.StatusAccepted, b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID)))
}

// Binding with a service_id or plan_id that is not the instance's, or with parameters the
// binding schema does not allow, is 400.
func TestBindChecksRequest(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	id := newID()
	b.FinishOperation(b.Provision(id, "rt-bind", "ga-bind"), "succeeded")
	path := "/v2/service_instances/" + id + "/service_bindings/" + newID()
	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"service_id": "nope", "plan_id": bt.AWSPlanID}, "service_id"},
		{map[string]any{"service_id": bt.ServiceID, "plan_id": bt.GCPPlanID}, "plan_id"},
		{map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSPlanID, "parameters": map[string]any{"ttl": 1}}, "parameters.ttl"},
		{map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSPlanID, "parameters": []any{}}, "parameters"},
		{map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSPlanID, "parameters": map[string]any{"expiration_seconds": 599}}, "parameters.expiration_seconds: must be between 600 and 7200"},
		{map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSPlanID, "parameters": map[string]any{"expiration_seconds": 7201}}, "parameters.expiration_seconds"},
		{map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSPlanID, "parameters": map[string]any{"expiration_seconds": "600"}}, "parameters.expiration_seconds: must be an integer"},
		{map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSPlanID, "parameters": map[string]any{"expiration_seconds": 600.5}}, "parameters.expiration_seconds: must be an integer"},
	} {
		r := b.Put(path, tc.body)
		requireStatus(t, http.StatusBadRequest, r)
		assert.Contains(t, r.Description(), tc.field)
	}
}

// schemas.service_binding.create.parameters was null on every plan.
func TestCatalogBindingSchema(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	r := b.Get("/v2/catalog")
	requireStatus(t, http.StatusOK, r)
	var catalog struct {
		Services []struct {
			Plans []struct {
				Name    string `json:"name"`
				Schemas struct {
					Binding map[string]map[string]json.RawMessage `json:"service_binding"`
				} `json:"schemas"`
			} `json:"plans"`
		} `json:"services"`
	}
	r.JSON(t, &catalog)
	require.NotEmpty(t, catalog.Services)
	for _, p := range catalog.Services[0].Plans {
		raw := p.Schemas.Binding["create"]["parameters"]
		var schema map[string]any
		require.NoError(t, json.Unmarshal(raw, &schema), p.Name)
		require.NotNil(t, schema, "%s: a JSON schema, not null", p.Name)
		assert.Equal(t, "object", schema["type"], p.Name)
		assert.Equal(t, map[string]any{"type": "integer", "minimum": float64(600), "maximum": float64(7200), "default": float64(600),
			"description": "Lifetime of the binding's token, in seconds."}, schema["properties"].(map[string]any)["expiration_seconds"], p.Name)
	}
}

// Leniencies: trailing garbage after the JSON body, a PATCH with a non-object context, and a
// 412 body spelled "Description".
func TestStrictBodiesAndErrorShapes(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	id := newID()
	valid, err := json.Marshal(bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt"), bt.SAPContext("ga", "sa")))
	require.NoError(t, err)
	for _, garbage := range []string{"x", "{}", `{"a":1}`, "]"} {
		r := b.Put(bt.InstancePath(id), string(valid)+garbage)
		requireStatus(t, http.StatusBadRequest, r)
		assert.Contains(t, r.Description(), "after the JSON object")
	}
	requireStatus(t, http.StatusAccepted, b.Put(bt.InstancePath(id), string(valid)+" \n"))
	b.FinishOperation(b.Operations(id)[0].ID, "succeeded")
	for _, ctx := range []any{"x", 1, []any{}, true} {
		r := b.Patch(bt.InstancePath(id), map[string]any{"service_id": bt.ServiceID, "context": ctx})
		requireStatus(t, http.StatusBadRequest, r)
		assert.Contains(t, r.Description(), "context")
	}
	r := b.Get("/v2/catalog", bt.WithoutAPIVersion())
	requireStatus(t, http.StatusPreconditionFailed, r)
	var body map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &body))
	assert.Contains(t, body, "description", "OSB's field name, lower case: %s", r.Body)
	assert.NotContains(t, body, "Description")
}

// Bindings broke OSB: GET was 404 although the catalog says bindings_retrievable, a repeated
// PUT was 201, another request under the same binding ID 201 (must be 409), unbinding one that
// never existed 200 (must be 410).
func TestBindingsFollowOSB(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{})
	id := newID()
	b.WaitSucceeded(id, b.Provision(id, "rt-bindings", "ga-bindings"))
	bindingID := newID()
	path := "/v2/service_instances/" + id + "/service_bindings/" + bindingID
	body := map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSPlanID}
	type answer struct {
		Credentials map[string]string `json:"credentials"`
	}
	var first, again, fetched answer

	r := b.Put(path, body)
	requireStatus(t, http.StatusCreated, r)
	r.JSON(t, &first)
	require.NotEmpty(t, first.Credentials["kubeconfig"])

	r = b.Put(path, body)
	requireStatus(t, http.StatusOK, r)
	r.JSON(t, &again)
	assert.Equal(t, first, again, "a repeat gets the same binding")

	r = b.Put(path, map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSPlanID, "bind_resource": map[string]any{"app_guid": "other-app"}})
	requireStatus(t, http.StatusConflict, r)

	r = b.Get(path)
	requireStatus(t, http.StatusOK, r)
	r.JSON(t, &fetched)
	assert.Equal(t, first, fetched)
	requireStatus(t, http.StatusNotFound, b.Get("/v2/service_instances/"+id+"/service_bindings/"+newID()))
	requireStatus(t, http.StatusNotFound, b.Get("/v2/service_instances/"+newID()+"/service_bindings/"+bindingID))
	// The binding ID under another live instance is not that instance's binding.
	other := newID()
	b.WaitSucceeded(other, b.Provision(other, "rt-bindings-other", "ga-bindings"))
	otherPath := "/v2/service_instances/" + other + "/service_bindings/" + bindingID
	requireStatus(t, http.StatusNotFound, b.Get(otherPath))
	requireStatus(t, http.StatusGone, b.Delete(otherPath+"?service_id="+bt.ServiceID+"&plan_id="+bt.AWSPlanID))
	requireStatus(t, http.StatusOK, b.Get(path))

	unbind := path + "?service_id=" + bt.ServiceID + "&plan_id=" + bt.AWSPlanID
	requireStatus(t, http.StatusBadRequest, b.Delete(path+"?service_id="+bt.ServiceID+"&plan_id="+bt.GCPPlanID))
	requireStatus(t, http.StatusOK, b.Delete(unbind))
	requireStatus(t, http.StatusGone, b.Delete(unbind))
	requireStatus(t, http.StatusNotFound, b.Get(path))
	requireStatus(t, http.StatusGone, b.Delete("/v2/service_instances/"+id+"/service_bindings/"+newID()+"?service_id="+bt.ServiceID+"&plan_id="+bt.AWSPlanID))

	// The binding ID is free again after unbinding.
	requireStatus(t, http.StatusCreated, b.Put(path, body))
}

// safeBuffer is a log sink the broker's goroutines may write to concurrently.
type safeBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A refused provisioning (400, 409, 422) logged the whole request at warning level, with
// context.sm_operator_credentials.clientsecret in plain text, and a refused body whole.
func TestRefusedRequestsLogNoSecrets(t *testing.T) {
	t.Parallel()
	var logs safeBuffer
	b := bt.Start(t, bt.Options{NoEngine: true, LogOutput: &logs})
	ctx := bt.SAPContext("ga-logs", "sa-logs")
	ctx["sm_operator_credentials"] = map[string]any{"clientid": "sm-client", "clientsecret": "S3CRET-SM-CLIENT-SECRET", "url": "https://sm.example.com", "sm_url": "https://sm.example.com"}
	id := newID()
	requireStatus(t, http.StatusAccepted, b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-logs"), ctx)))
	requireStatus(t, http.StatusConflict, b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-logs-other"), ctx)))
	requireStatus(t, http.StatusUnprocessableEntity, b.Put("/v2/service_instances/"+newID(), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-logs"), ctx)))
	bad := bt.ProvisionBody(bt.AWSPlanID, map[string]any{"name": "rt-logs", "region": "mars", "pad": strings.Repeat("p", 500_000)}, ctx)
	requireStatus(t, http.StatusBadRequest, b.Put(bt.InstancePath(newID()), bad))

	out := logs.String()
	require.NotEmpty(t, out)
	require.Contains(t, out, "sm_operator_credentials", "the refused requests are logged with their context, redacted")
	assert.NotContains(t, out, "S3CRET")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		assert.Less(t, len(line), 32<<10, "a log line stays bounded: %.200s", line)
	}
}

// Issue 38 item 9: organization_guid and space_guid are non-empty strings when given (OSB);
// "" and null got 202 when the context named the accounts. Absent is fine.
func TestCloudFoundryGUIDsMustBeNonEmptyWhenGiven(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	body := func(org, space string) string {
		out := `{"service_id":"` + bt.ServiceID + `","plan_id":"` + bt.AWSPlanID + `","context":{"globalaccount_id":"ga","subaccount_id":"sa"},"parameters":{"name":"cf","region":"eu-central-1"}`
		if org != "" {
			out += `,"organization_guid":` + org
		}
		if space != "" {
			out += `,"space_guid":` + space
		}
		return out + "}"
	}
	for _, c := range []struct{ org, space, field string }{
		{`""`, `"s"`, "organization_guid"}, {`null`, `"s"`, "organization_guid"}, {`"o"`, `""`, "space_guid"},
		{`"o"`, `null`, "space_guid"}, {`7`, ``, "organization_guid"},
	} {
		id := newID()
		r := b.Put(bt.InstancePath(id), body(c.org, c.space))
		requireStatus(t, http.StatusBadRequest, r)
		assert.Contains(t, r.Description(), c.field, "%s %s", c.org, c.space)
		assert.Empty(t, b.Operations(id))
	}
	for _, c := range [][2]string{{"", ""}, {`"o"`, `"s"`}} {
		r := b.Put(bt.InstancePath(newID()), body(c[0], c[1]))
		requireStatus(t, http.StatusAccepted, r)
	}
}
