package broker_test

import (
	"encoding/json"
	"net/http"
	"testing"

	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// OSB 2.17, endpoint by endpoint: every MUST on status codes and bodies, each a subtest named
// after the rule. Deliberate deviations are listed in docs/user/endpoints.md.
func TestOSBSpecMusts(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	errorCode := func(r bt.Response) string {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(r.Body, &e)
		return e.Error
	}
	provisioned := func(name string) string {
		id := newID()
		b.FinishOperation(b.Provision(id, name, "ga-"+name), "succeeded")
		b.ModifyInstance(id, func(i *storage.Instance) { i.RuntimeID = newID() })
		return id
	}

	t.Run("headers: 412 without a 2.x X-Broker-API-Version", func(t *testing.T) {
		requireStatus(t, http.StatusPreconditionFailed, b.Get("/v2/catalog", bt.WithoutAPIVersion()))
		requireStatus(t, http.StatusPreconditionFailed, b.Get("/v2/catalog", bt.WithHeader("X-Broker-API-Version", "3.0")))
	})
	t.Run("errors: bodies are JSON objects with description", func(t *testing.T) {
		r := b.Delete(bt.DeprovisionPath(newID(), bt.AWSPlanID))
		var body map[string]any
		require.NoError(t, json.Unmarshal(r.Body, &body), "%s", r)
	})
	t.Run("catalog: 200 with services", func(t *testing.T) {
		r := b.Get("/v2/catalog")
		requireStatus(t, http.StatusOK, r)
		assert.Contains(t, string(r.Body), `"services"`)
	})

	t.Run("provision: 202 with an operation when in progress", func(t *testing.T) {
		r := b.Put(bt.InstancePath(newID()), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("spec-202"), bt.SAPContext("ga-s", "sa-s")))
		requireStatus(t, http.StatusAccepted, r)
		assert.NotEmpty(t, r.Operation())
	})
	t.Run("provision: a re-sent PUT while in progress is 202 with the same operation", func(t *testing.T) {
		id := newID()
		body := bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("spec-resend"), bt.SAPContext("ga-r", "sa-r"))
		first := b.Put(bt.InstancePath(id), body)
		again := b.Put(bt.InstancePath(id), body)
		requireStatus(t, http.StatusAccepted, again)
		assert.Equal(t, first.Operation(), again.Operation())
	})
	t.Run("provision: 400 for a malformed request", func(t *testing.T) {
		requireStatus(t, http.StatusBadRequest, b.Put(bt.InstancePath(newID()), `{"service_id":`))
		requireStatus(t, http.StatusBadRequest, b.Put(bt.InstancePath(newID()), map[string]any{"service_id": bt.ServiceID}))
	})
	t.Run("provision: 409 for the same id with other attributes", func(t *testing.T) {
		id := newID()
		requireStatus(t, http.StatusAccepted, b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("spec-409"), bt.SAPContext("ga-c", "sa-c"))))
		requireStatus(t, http.StatusConflict, b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("spec-409-other"), bt.SAPContext("ga-c", "sa-c"))))
	})
	t.Run("provision: 422 AsyncRequired without accepts_incomplete", func(t *testing.T) {
		r := b.Put("/v2/service_instances/"+newID(), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("spec-async"), bt.SAPContext("ga-a", "sa-a")))
		requireStatus(t, http.StatusUnprocessableEntity, r)
		assert.Equal(t, "AsyncRequired", errorCode(r))
	})

	t.Run("fetch instance: 404 while provisioning is in progress", func(t *testing.T) {
		id := newID()
		b.Provision(id, "spec-fetch", "ga-f")
		requireStatus(t, http.StatusNotFound, b.Get("/v2/service_instances/"+id))
		requireStatus(t, http.StatusNotFound, b.Get("/v2/service_instances/"+newID()))
	})
	t.Run("fetch instance: 422 ConcurrencyError while it is being updated", func(t *testing.T) {
		id := provisioned("spec-fetch-upd")
		requireStatus(t, http.StatusOK, b.Get("/v2/service_instances/"+id))
		requireStatus(t, http.StatusAccepted, b.Patch(bt.InstancePath(id), map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSHAPlanID}))
		r := b.Get("/v2/service_instances/" + id)
		requireStatus(t, http.StatusUnprocessableEntity, r)
		assert.Equal(t, "ConcurrencyError", errorCode(r))
	})

	t.Run("update: 202 in progress, a re-sent PATCH 202 with the same operation", func(t *testing.T) {
		id := provisioned("spec-upd")
		body := map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSHAPlanID}
		first := b.Patch(bt.InstancePath(id), body)
		requireStatus(t, http.StatusAccepted, first)
		again := b.Patch(bt.InstancePath(id), body)
		requireStatus(t, http.StatusAccepted, again)
		assert.Equal(t, first.Operation(), again.Operation())
	})
	t.Run("update: 200 when the changes have no effect", func(t *testing.T) {
		requireStatus(t, http.StatusOK, b.Patch(bt.InstancePath(provisioned("spec-noop")), map[string]any{"service_id": bt.ServiceID}))
	})
	t.Run("update: 400 for a malformed request", func(t *testing.T) {
		requireStatus(t, http.StatusBadRequest, b.Patch(bt.InstancePath(provisioned("spec-upd-400")), `{"service_id": [`))
	})
	t.Run("update: 422 AsyncRequired without accepts_incomplete", func(t *testing.T) {
		r := b.Patch("/v2/service_instances/"+provisioned("spec-upd-async"), map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSHAPlanID})
		requireStatus(t, http.StatusUnprocessableEntity, r)
		assert.Equal(t, "AsyncRequired", errorCode(r))
	})
	t.Run("update: a refused request changes nothing", func(t *testing.T) {
		id := provisioned("spec-upd-nochange")
		requireStatus(t, http.StatusBadRequest, b.Patch(bt.InstancePath(id), map[string]any{"service_id": bt.ServiceID, "plan_id": bt.GCPPlanID}))
		assert.Len(t, b.Operations(id), 1)
	})

	t.Run("last_operation: 200 with state, 404 for an unknown instance, 400 for another instance's operation", func(t *testing.T) {
		id := newID()
		op := b.Provision(id, "spec-lo", "ga-lo")
		r := b.Get(bt.LastOperationPath(id, op))
		requireStatus(t, http.StatusOK, r)
		assert.Contains(t, string(r.Body), `"state"`)
		requireStatus(t, http.StatusNotFound, b.Get(bt.LastOperationPath(newID(), "")))
		other := newID()
		b.Provision(other, "spec-lo-other", "ga-lo-o")
		requireStatus(t, http.StatusBadRequest, b.Get(bt.LastOperationPath(other, op)))
	})

	t.Run("bind: 400 for a malformed request", func(t *testing.T) {
		requireStatus(t, http.StatusBadRequest, b.Put("/v2/service_instances/"+provisioned("spec-bind")+"/service_bindings/"+newID(), `{"service_id":`))
	})
	t.Run("unbind: 410 when the binding does not exist", func(t *testing.T) {
		r := b.Delete("/v2/service_instances/" + provisioned("spec-unbind") + "/service_bindings/" + newID() + "?service_id=" + bt.ServiceID + "&plan_id=" + bt.AWSPlanID)
		requireStatus(t, http.StatusGone, r)
	})
	t.Run("fetch binding: 404 when it does not exist", func(t *testing.T) {
		requireStatus(t, http.StatusNotFound, b.Get("/v2/service_instances/"+provisioned("spec-getb")+"/service_bindings/"+newID()))
	})

	t.Run("deprovision: 202 in progress, a re-sent DELETE 202 with the same operation", func(t *testing.T) {
		id := provisioned("spec-del")
		first := b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID))
		requireStatus(t, http.StatusAccepted, first)
		again := b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID))
		requireStatus(t, http.StatusAccepted, again)
		assert.Equal(t, first.Operation(), again.Operation())
	})
	t.Run("deprovision: 400 for missing or foreign service_id/plan_id", func(t *testing.T) {
		id := provisioned("spec-del-400")
		requireStatus(t, http.StatusBadRequest, b.Delete(bt.InstancePath(id)))
		requireStatus(t, http.StatusBadRequest, b.Delete(bt.DeprovisionPath(id, bt.GCPPlanID)))
	})
	t.Run("deprovision: 410 when the instance does not exist", func(t *testing.T) {
		requireStatus(t, http.StatusGone, b.Delete(bt.DeprovisionPath(newID(), bt.AWSPlanID)))
	})
	t.Run("deprovision: 422 AsyncRequired without accepts_incomplete", func(t *testing.T) {
		r := b.Delete("/v2/service_instances/" + provisioned("spec-del-async") + "?service_id=" + bt.ServiceID + "&plan_id=" + bt.AWSPlanID)
		requireStatus(t, http.StatusUnprocessableEntity, r)
		assert.Equal(t, "AsyncRequired", errorCode(r))
	})
}
