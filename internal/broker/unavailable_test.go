package broker_test

import (
	"net/http"
	"testing"

	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/health"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// While PostgreSQL is down every endpoint that needs it answers 503 with Retry-After, which
// OSB platforms retry, instead of 500; once it is back the same broker answers again.
func TestAnUnreachableDatabaseAnswers503WithRetryAfter(t *testing.T) {
	pg := pgtest.StartPrivate(t)
	b := bt.Start(t, bt.Options{DatabaseURL: pg.URL, NoSandbox: true})
	id := newID()
	prov := b.Provision(id, "rt-outage", "ga-outage")
	b.WaitSucceeded(id, prov)
	fresh := newID()

	pg.Stop()
	bindingPath := "/v2/service_instances/" + id + "/service_bindings/" + newID() + "?accepts_incomplete=true"
	for name, send := range map[string]func() bt.Response{
		"provision": func() bt.Response {
			return b.Put(bt.InstancePath(fresh), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-fresh"), bt.SAPContext("ga-fresh", "sa-fresh")))
		},
		"update": func() bt.Response {
			return b.Patch(bt.InstancePath(id), map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSPlanID, "parameters": map[string]any{"autoScalerMax": 40}})
		},
		"deprovision":    func() bt.Response { return b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID)) },
		"last_operation": func() bt.Response { return b.Get(bt.LastOperationPath(id, prov)) },
		"get instance":   func() bt.Response { return b.Get("/v2/service_instances/" + id) },
		"bind": func() bt.Response {
			return b.Put(bindingPath, map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSPlanID})
		},
		"runtimes": func() bt.Response { return b.Get("/runtimes") },
		"events":   func() bt.Response { return b.Get("/events?instance_ids=" + id) },
		"readyz":   func() bt.Response { return b.Get("/readyz", bt.WithoutAuth(), bt.WithoutAPIVersion()) },
	} {
		r := send()
		assert.Equal(t, http.StatusServiceUnavailable, r.Status, "%s: %s", name, r)
		assert.Equal(t, "5", r.Header.Get("Retry-After"), name)
		if name != "readyz" {
			assert.Contains(t, string(r.Body), health.UnavailableMessage, name)
		}
	}

	pg.Start()
	r := b.Get(bt.LastOperationPath(id, prov))
	require.Equal(t, http.StatusOK, r.Status, r.String())
	assert.Empty(t, r.Header.Get("Retry-After"))
	b.WaitSucceeded(fresh, b.Provision(fresh, "rt-fresh", "ga-fresh"))
}
