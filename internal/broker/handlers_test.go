package broker_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newID() string { return uuid.NewString() }

func requireStatus(t *testing.T, want int, r bt.Response) {
	t.Helper()
	require.Equal(t, want, r.Status, "response: %s", r)
}

func TestProvisionAccepted(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	id := newID()
	r := b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-accepted"), bt.SAPContext("ga-acc", "sa-acc")))
	requireStatus(t, http.StatusAccepted, r)
	require.NotEmpty(t, r.Operation())

	op, err := b.Store.Operations().GetOperation(context.Background(), r.Operation())
	require.NoError(t, err)
	assert.Equal(t, id, op.InstanceID)
	assert.Equal(t, "provision", op.Type)
	inst, err := b.Store.Instances().GetInstance(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, "ga-acc", inst.GlobalAccountID)
	assert.Equal(t, "sa-acc", inst.SubAccountID)
	assert.Equal(t, bt.AWSPlanID, inst.PlanID)
	assert.Equal(t, "eu-central-1", inst.ProviderRegion)
}

func TestProvisionAsyncRequired(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	id := newID()
	r := b.Put("/v2/service_instances/"+id, bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt"), bt.SAPContext("ga", "sa")))
	requireStatus(t, http.StatusUnprocessableEntity, r)
	assert.Contains(t, string(r.Body), "AsyncRequired")
	r = b.Put("/v2/service_instances/"+id+"?accepts_incomplete=false", bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt"), bt.SAPContext("ga", "sa")))
	requireStatus(t, http.StatusUnprocessableEntity, r)
	assert.Empty(t, b.Operations(id), "a refused request stores nothing")
}

func TestProvisionBadRequest(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	ctx := bt.SAPContext("ga-bad", "sa-bad")
	params := func(kv ...any) map[string]any {
		p := bt.AWSParams("rt-bad")
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(p, kv[i].(string))
				continue
			}
			p[kv[i].(string)] = kv[i+1]
		}
		return p
	}
	for _, tc := range []struct {
		name string
		body any
		// field is a part of the description naming what is wrong.
		field string
	}{
		{"malformed JSON", `{"service_id": "` + bt.ServiceID + `", `, "malformed JSON"},
		{"not an object", `[1, 2]`, "malformed JSON"},
		{"empty body", ``, "malformed JSON"},
		{"service_id of the wrong type", `{"service_id": 5, "plan_id": "` + bt.AWSPlanID + `"}`, "service_id"},
		{"missing service_id", map[string]any{"plan_id": bt.AWSPlanID, "parameters": params(), "context": ctx}, "service_id"},
		{"missing plan_id", map[string]any{"service_id": bt.ServiceID, "parameters": params(), "context": ctx}, "plan_id"},
		// brokerapi checks the catalog first and spells the fields service-id and plan-id.
		{"unknown service", map[string]any{"service_id": "f3b1b0b2-0000-4000-8000-000000000000", "plan_id": bt.AWSPlanID, "parameters": params(), "context": ctx}, "service-id"},
		{"unknown plan", bt.ProvisionBody("f3b1b0b2-0000-4000-8000-000000000001", params(), ctx), "plan-id"},
		// The catalog has one service: the plan of another service is a plan this one lacks,
		// or a known plan sent with another service's ID.
		{"plan of another service", map[string]any{"service_id": "another-service", "plan_id": bt.TrialPlanID, "parameters": params(), "context": ctx}, "service-id"},
		{"missing name", bt.ProvisionBody(bt.AWSPlanID, params("name", nil), ctx), "name"},
		{"name with forbidden characters", bt.ProvisionBody(bt.AWSPlanID, params("name", "bad name!"), ctx), "name"},
		{"name too long", bt.ProvisionBody(bt.AWSPlanID, params("name", strings.Repeat("a", 65)), ctx), "name"},
		{"name of the wrong type", bt.ProvisionBody(bt.AWSPlanID, params("name", 42), ctx), "name"},
		{"missing region", bt.ProvisionBody(bt.AWSPlanID, params("region", nil), ctx), "region"},
		{"region of another provider", bt.ProvisionBody(bt.AWSPlanID, params("region", "westeurope"), ctx), "region"},
		{"unknown machine type", bt.ProvisionBody(bt.AWSPlanID, params("machineType", "huge"), ctx), "machineType"},
		{"autoScalerMin below 3", bt.ProvisionBody(bt.AWSPlanID, params("autoScalerMin", 1), ctx), "autoScalerMin"},
		{"autoScalerMin above autoScalerMax", bt.ProvisionBody(bt.AWSPlanID, params("autoScalerMin", 10, "autoScalerMax", 5), ctx), "autoScaler"},
		{"invalid CIDR", bt.ProvisionBody(bt.AWSPlanID, params("networking", map[string]any{"nodes": "10.250.0.0/99"}), ctx), "networking"},
		{"overlapping CIDRs", bt.ProvisionBody(bt.AWSPlanID, params("networking", map[string]any{"nodes": "10.96.0.0/16"}), ctx), "networking"},
		{"unknown parameter", bt.ProvisionBody(bt.AWSPlanID, params("colour", "blue"), ctx), "colour"},
		{"administrators not a list", bt.ProvisionBody(bt.AWSPlanID, params("administrators", "jane"), ctx), "administrators"},
		{"parameters not an object", map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSPlanID, "parameters": "x", "context": ctx}, "parameters"},
		{"missing global account", bt.ProvisionBody(bt.AWSPlanID, params(), map[string]any{"platform": "sapcp", "subaccount_id": "sa"}), "context.globalaccount_id"},
		{"missing context", bt.ProvisionBody(bt.AWSPlanID, params(), nil), "context.globalaccount_id"},
		{"missing subaccount", bt.ProvisionBody(bt.AWSPlanID, params(), map[string]any{"platform": "sapcp", "globalaccount_id": "ga"}), "context.subaccount_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := newID()
			r := b.Put(bt.InstancePath(id), tc.body)
			requireStatus(t, http.StatusBadRequest, r)
			assert.Contains(t, r.Description(), tc.field)
			assert.Empty(t, b.Operations(id))
		})
	}
}

func TestProvisionPlatformContexts(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	for _, tc := range []struct {
		name           string
		body           map[string]any
		wantGA, wantSA string
	}{
		{
			// cf create-service: organization and space in the body, no global account.
			name: "cloud foundry body",
			body: map[string]any{
				"service_id": bt.ServiceID, "plan_id": bt.AWSPlanID, "parameters": bt.AWSParams("rt-cf"),
				"organization_guid": "org-guid-1", "space_guid": "space-guid-1",
				"context": map[string]any{"platform": "cloudfoundry", "organization_name": "org", "space_name": "space"},
			},
			wantGA: "org-guid-1", wantSA: "space-guid-1",
		},
		{
			name: "cloud foundry context",
			body: bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-cf2"), map[string]any{
				"platform": "cloudfoundry", "organization_guid": "org-guid-2", "space_guid": "space-guid-2",
			}),
			wantGA: "org-guid-2", wantSA: "space-guid-2",
		},
		{
			name: "kubernetes context",
			body: bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-k8s"), map[string]any{
				"platform": "kubernetes", "namespace": "team-a", "clusterid": "cluster-1", "instance_name": "mine",
			}),
			wantGA: "cluster-1", wantSA: "team-a",
		},
		{
			name: "BTP context with service manager credentials",
			body: bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-sap"), map[string]any{
				"platform": "sapcp", "globalaccount_id": "ga-sap", "subaccount_id": "sa-sap", "user_id": "joe@example.com",
				"license_type": "CUSTOMER", "sm_operator_credentials": map[string]any{"clientid": "c", "clientsecret": "s", "sm_url": "https://sm", "url": "https://uaa", "xsappname": "x"},
			}),
			wantGA: "ga-sap", wantSA: "sa-sap",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := newID()
			r := b.Put(bt.InstancePath(id), tc.body)
			requireStatus(t, http.StatusAccepted, r)
			inst, err := b.Store.Instances().GetInstance(context.Background(), id)
			require.NoError(t, err)
			assert.Equal(t, tc.wantGA, inst.GlobalAccountID)
			assert.Equal(t, tc.wantSA, inst.SubAccountID)
		})
	}
}

func TestProvisionTrialOnePerGlobalAccount(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	trial := func(ga string) map[string]any {
		return bt.ProvisionBody(bt.TrialPlanID, map[string]any{"name": "trial-rt"}, bt.SAPContext(ga, "sa-"+ga))
	}
	first := newID()
	requireStatus(t, http.StatusAccepted, b.Put(bt.InstancePath(first), trial("ga-trial")))
	// The same request again is a repeat, not a second trial.
	requireStatus(t, http.StatusAccepted, b.Put(bt.InstancePath(first), trial("ga-trial")))

	r := b.Put(bt.InstancePath(newID()), trial("ga-trial"))
	requireStatus(t, http.StatusBadRequest, r)
	assert.Contains(t, r.Description(), first)
	assert.Contains(t, r.Description(), "trial")

	requireStatus(t, http.StatusAccepted, b.Put(bt.InstancePath(newID()), trial("ga-other")))
}

func TestProvisionRepeat(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{})
	id := newID()
	body := bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-repeat"), bt.SAPContext("ga-rep", "sa-rep"))
	first := b.Put(bt.InstancePath(id), body)
	requireStatus(t, http.StatusAccepted, first)

	again := b.Put(bt.InstancePath(id), body)
	requireStatus(t, http.StatusAccepted, again)
	assert.Equal(t, first.Operation(), again.Operation(), "the repeat gets the running operation")

	other := bt.AWSParams("rt-repeat")
	other["machineType"] = "m6i.xlarge"
	requireStatus(t, http.StatusConflict, b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, other, bt.SAPContext("ga-rep", "sa-rep"))))
	requireStatus(t, http.StatusConflict, b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSHAPlanID, bt.AWSParams("rt-repeat"), bt.SAPContext("ga-rep", "sa-rep"))))
	// Another global account or subaccount is another request for the same instance ID.
	requireStatus(t, http.StatusConflict, b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-repeat"), bt.SAPContext("ga-intruder", "sa-rep"))))
	requireStatus(t, http.StatusConflict, b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-repeat"), bt.SAPContext("ga-rep", "sa-intruder"))))

	b.WaitSucceeded(id, first.Operation())
	done := b.Put(bt.InstancePath(id), body)
	requireStatus(t, http.StatusOK, done)
	assert.Empty(t, done.Operation())
	assert.Contains(t, string(done.Body), "dashboard_url")
	requireStatus(t, http.StatusConflict, b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, other, bt.SAPContext("ga-rep", "sa-rep"))))
	assert.Len(t, b.Operations(id), 1)
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{})
	id := newID()
	prov := b.Provision(id, "rt-update", "ga-upd")
	patch := func(body map[string]any) bt.Response { return b.Patch(bt.InstancePath(id), body) }

	// While provisioning runs.
	r := patch(map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSHAPlanID})
	requireStatus(t, http.StatusUnprocessableEntity, r)
	assert.Contains(t, string(r.Body), "ConcurrencyError")
	b.WaitSucceeded(id, prov)

	// Not along the allowed upgrades (aws -> aws_ha only).
	r = patch(map[string]any{"service_id": bt.ServiceID, "plan_id": bt.GCPPlanID})
	requireStatus(t, http.StatusBadRequest, r)
	assert.Contains(t, r.Description(), "plan_id")
	r = patch(map[string]any{"service_id": bt.ServiceID, "plan_id": "f3b1b0b2-0000-4000-8000-000000000001"})
	requireStatus(t, http.StatusBadRequest, r)
	assert.Contains(t, r.Description(), "plan_id")
	// Parameters outside the update schema.
	r = patch(map[string]any{"service_id": bt.ServiceID, "parameters": map[string]any{"region": "us-east-1"}})
	requireStatus(t, http.StatusBadRequest, r)
	assert.Contains(t, r.Description(), "region")
	r = patch(map[string]any{"service_id": bt.ServiceID, "parameters": map[string]any{"autoScalerMax": 2}})
	requireStatus(t, http.StatusBadRequest, r)
	assert.Contains(t, r.Description(), "autoScalerMax")
	requireStatus(t, http.StatusBadRequest, b.Patch(bt.InstancePath(id), `{"service_id": `))
	r = b.Patch(bt.InstancePath(id), map[string]any{"plan_id": bt.AWSHAPlanID})
	requireStatus(t, http.StatusBadRequest, r)
	assert.Contains(t, r.Description(), "service_id")

	// Without accepts_incomplete a change is refused.
	r = b.Patch("/v2/service_instances/"+id, map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSHAPlanID})
	requireStatus(t, http.StatusUnprocessableEntity, r)
	assert.Contains(t, string(r.Body), "AsyncRequired")

	// Allowed upgrade.
	r = patch(map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSHAPlanID, "parameters": map[string]any{"autoScalerMax": 30}})
	requireStatus(t, http.StatusAccepted, r)
	upd := r.Operation()
	require.NotEmpty(t, upd)

	// Another update while this one runs.
	r = patch(map[string]any{"service_id": bt.ServiceID, "parameters": map[string]any{"autoScalerMax": 25}})
	requireStatus(t, http.StatusUnprocessableEntity, r)
	assert.Contains(t, string(r.Body), "ConcurrencyError")

	b.WaitSucceeded(id, upd)
	var got struct {
		PlanID     string         `json:"plan_id"`
		Parameters map[string]any `json:"parameters"`
	}
	g := b.Get("/v2/service_instances/" + id)
	requireStatus(t, http.StatusOK, g)
	g.JSON(t, &got)
	assert.Equal(t, bt.AWSHAPlanID, got.PlanID)
	assert.EqualValues(t, 30, got.Parameters["autoScalerMax"])

	// Nothing to change (e.g. a context-only update): 200 without an operation.
	r = patch(map[string]any{"service_id": bt.ServiceID, "context": map[string]any{"globalaccount_id": "ga-upd"}})
	requireStatus(t, http.StatusOK, r)
	assert.Empty(t, r.Operation())
}

func TestUpdateAfterFailedProvisioning(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{FailureRate: 1})
	id := newID()
	op := b.Provision(id, "rt-doomed", "ga-fail")
	lo := b.WaitForLastOperation(id, op, 20*time.Second)
	require.Equal(t, domain.Failed, lo.State, "%+v", lo)
	assert.NotEmpty(t, lo.Description)

	r := b.Patch(bt.InstancePath(id), map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSHAPlanID})
	requireStatus(t, http.StatusUnprocessableEntity, r)
	assert.Contains(t, r.Description(), "failed provisioning")
	requireStatus(t, http.StatusNotFound, b.Get("/v2/service_instances/"+id))
	// A repeat of the failed request reports the failed operation.
	r = b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-doomed"), bt.SAPContext("ga-fail", "sub-ga-fail")))
	requireStatus(t, http.StatusAccepted, r)
	assert.Equal(t, op, r.Operation())

	// It can still be deprovisioned.
	d := b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID))
	requireStatus(t, http.StatusAccepted, d)
	b.WaitSucceeded(id, d.Operation())
}

func TestUpdateWhileDeprovisioning(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{})
	id := newID()
	b.WaitSucceeded(id, b.Provision(id, "rt-upd-deprov", "ga-ud"))
	d := b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID))
	requireStatus(t, http.StatusAccepted, d)
	r := b.Patch(bt.InstancePath(id), map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSHAPlanID})
	requireStatus(t, http.StatusUnprocessableEntity, r)
	assert.Contains(t, r.Description(), "deprovision")
	b.WaitSucceeded(id, d.Operation())
}

func TestDeprovision(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{})
	requireStatus(t, http.StatusGone, b.Delete(bt.DeprovisionPath(newID(), bt.AWSPlanID)))

	id := newID()
	b.WaitSucceeded(id, b.Provision(id, "rt-deprov", "ga-dep"))
	requireStatus(t, http.StatusUnprocessableEntity, b.Delete("/v2/service_instances/"+id+"?service_id="+bt.ServiceID+"&plan_id="+bt.AWSPlanID))

	first := b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID))
	requireStatus(t, http.StatusAccepted, first)
	require.NotEmpty(t, first.Operation())
	again := b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID))
	requireStatus(t, http.StatusAccepted, again)
	assert.Equal(t, first.Operation(), again.Operation(), "a repeat returns the running deprovisioning")

	b.WaitSucceeded(id, first.Operation())
	lo := b.Get(bt.LastOperationPath(id, first.Operation()))
	requireStatus(t, http.StatusOK, lo)
	assert.Contains(t, string(lo.Body), `"succeeded"`)
	lo = b.Get(bt.LastOperationPath(id, ""))
	requireStatus(t, http.StatusOK, lo)
	assert.Contains(t, string(lo.Body), `"succeeded"`)

	requireStatus(t, http.StatusGone, b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID)))
	requireStatus(t, http.StatusNotFound, b.Get("/v2/service_instances/"+id))
	// The archived instance ID cannot be provisioned again.
	requireStatus(t, http.StatusConflict, b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-deprov"), bt.SAPContext("ga-dep", "sub-ga-dep"))))
}

func TestLastOperation(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	requireStatus(t, http.StatusNotFound, b.Get(bt.LastOperationPath(newID(), "")))

	a, other := newID(), newID()
	opA := b.Provision(a, "rt-a", "ga-lo")
	opOther := b.Provision(other, "rt-b", "ga-lo2")

	var lo bt.LastOperation
	r := b.Get(bt.LastOperationPath(a, opA))
	requireStatus(t, http.StatusOK, r)
	r.JSON(t, &lo)
	assert.Equal(t, domain.InProgress, lo.State)

	r = b.Get(bt.LastOperationPath(a, opOther))
	requireStatus(t, http.StatusBadRequest, r)
	assert.Contains(t, r.Description(), "operation")

	// Mark the provisioning done; an update follows: no id and an unknown id give the latest.
	ctx := context.Background()
	op, err := b.Store.Operations().GetOperation(ctx, opA)
	require.NoError(t, err)
	op.State, op.DueAt, op.Description = storage.StateSucceeded, nil, "done"
	_, err = b.Store.Operations().UpdateOperation(ctx, op)
	require.NoError(t, err)
	r = b.Get(bt.LastOperationPath(a, opA))
	requireStatus(t, http.StatusOK, r)
	r.JSON(t, &lo)
	assert.Equal(t, domain.Succeeded, lo.State)

	time.Sleep(5 * time.Millisecond) // the update is strictly newer
	u := b.Patch(bt.InstancePath(a), map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSHAPlanID})
	requireStatus(t, http.StatusAccepted, u)
	for _, q := range []string{"", "not-an-operation", newID()} {
		r = b.Get(bt.LastOperationPath(a, q))
		requireStatus(t, http.StatusOK, r)
		r.JSON(t, &lo)
		assert.Equal(t, domain.InProgress, lo.State, "operation %q: the latest is the running update", q)
	}
	r = b.Get(bt.LastOperationPath(a, opA))
	r.JSON(t, &lo)
	assert.Equal(t, domain.Succeeded, lo.State, "by ID: the provisioning")
}

func TestGetInstance(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{})
	requireStatus(t, http.StatusNotFound, b.Get("/v2/service_instances/"+newID()))
	id := newID()
	op := b.Provision(id, "rt-get", "ga-get")
	requireStatus(t, http.StatusNotFound, b.Get("/v2/service_instances/"+id))
	b.WaitSucceeded(id, op)

	r := b.Get("/v2/service_instances/" + id)
	requireStatus(t, http.StatusOK, r)
	var got struct {
		ServiceID    string         `json:"service_id"`
		PlanID       string         `json:"plan_id"`
		DashboardURL string         `json:"dashboard_url"`
		Parameters   map[string]any `json:"parameters"`
	}
	r.JSON(t, &got)
	assert.Equal(t, bt.ServiceID, got.ServiceID)
	assert.Equal(t, bt.AWSPlanID, got.PlanID)
	assert.Regexp(t, `^https://console\.\S+$`, got.DashboardURL, "the runtime's console, from the Director")
	assert.Equal(t, "rt-get", got.Parameters["name"])
	assert.Equal(t, "eu-central-1", got.Parameters["region"])
	assert.Equal(t, "m6i.large", got.Parameters["machineType"], "defaults are applied")
}

func TestAPIVersionRequired(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	for _, path := range []string{"/v2/catalog", "/oauth/v2/catalog", "/oauth/cf-eu20/v2/catalog"} {
		r := b.Get(path, bt.WithoutAPIVersion())
		requireStatus(t, http.StatusPreconditionFailed, r)
		assert.Contains(t, r.Description(), "X-Broker-API-Version")
	}
	id := newID()
	requireStatus(t, http.StatusPreconditionFailed, b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt"), bt.SAPContext("ga", "sa")), bt.WithoutAPIVersion()))
	requireStatus(t, http.StatusPreconditionFailed, b.Get("/v2/catalog", bt.WithHeader("X-Broker-API-Version", "1.13")))
	assert.Empty(t, b.Operations(id))
	r := b.Get("/v2/catalog", bt.WithHeader("X-Broker-API-Request-Identity", "req-42"))
	requireStatus(t, http.StatusOK, r)
	assert.Equal(t, "req-42", r.Header.Get("X-Broker-API-Request-Identity"), "request identity echoed")
}

func TestUnauthorized(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	for _, path := range []string{"/v2/catalog", "/oauth/v2/catalog", "/oauth/cf-eu20/v2/catalog", "/runtimes", "/events?instance_ids=x"} {
		for name, opt := range map[string]bt.RequestOption{
			"missing":        bt.WithoutAuth(),
			"wrong password": bt.WithBasicAuth(bt.Username, "wrong"),
			"wrong user":     bt.WithBasicAuth("admin", bt.Password),
			"bearer":         bt.WithHeader("Authorization", "Bearer abc"),
		} {
			r := b.Get(path, opt)
			requireStatus(t, http.StatusUnauthorized, r)
			assert.Equal(t, "unauthorized", r.Description(), "%s %s: no hint which part was wrong", path, name)
		}
	}
	id := newID()
	requireStatus(t, http.StatusUnauthorized, b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt"), bt.SAPContext("ga", "sa")), bt.WithoutAuth()))
	assert.Empty(t, b.Operations(id))
}

type catalogResponse struct {
	Services []struct {
		ID    string `json:"id"`
		Name  string `json:"name"`
		Plans []struct {
			ID      string `json:"id"`
			Name    string `json:"name"`
			Schemas struct {
				Instance struct {
					Create struct {
						Parameters struct {
							Properties map[string]struct {
								Enum []string `json:"enum"`
							} `json:"properties"`
						} `json:"parameters"`
					} `json:"create"`
				} `json:"service_instance"`
			} `json:"schemas"`
		} `json:"plans"`
	} `json:"services"`
}

func (c catalogResponse) regions(t *testing.T, plan string) []string {
	t.Helper()
	require.Len(t, c.Services, 1)
	for _, p := range c.Services[0].Plans {
		if p.Name == plan {
			return p.Schemas.Instance.Create.Parameters.Properties["region"].Enum
		}
	}
	t.Fatalf("plan %s not in the catalog", plan)
	return nil
}

func TestCatalogByRegion(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	get := func(path string) catalogResponse {
		r := b.Get(path)
		requireStatus(t, http.StatusOK, r)
		var c catalogResponse
		r.JSON(t, &c)
		require.Len(t, c.Services, 1)
		assert.Equal(t, bt.ServiceID, c.Services[0].ID)
		assert.Equal(t, "kymaruntime", c.Services[0].Name)
		return c
	}
	eu10, eu20, eu11 := get("/oauth/cf-eu10/v2/catalog"), get("/oauth/cf-eu20/v2/catalog"), get("/oauth/cf-eu11/v2/catalog")
	assert.Equal(t, []string{"eu-central-1", "us-east-1", "ap-southeast-1"}, eu10.regions(t, "trial"), "cf-eu10: trial on AWS")
	assert.Equal(t, []string{"westeurope", "eastus", "australiaeast"}, eu20.regions(t, "trial"), "cf-eu20: trial on Azure")
	assert.Equal(t, []string{"eu-central-1"}, eu11.regions(t, "aws"), "cf-eu11: data residency")
	assert.NotEqual(t, eu10.regions(t, "aws"), eu11.regions(t, "aws"))
	// /v2 and /oauth/v2 are the default platform region, cf-eu10.
	assert.Equal(t, eu10, get("/v2/catalog"))
	assert.Equal(t, eu10, get("/oauth/v2/catalog"))

	// The region decides what a provisioning may ask for.
	body := bt.ProvisionBody(bt.TrialPlanID, map[string]any{"name": "t", "region": "westeurope"}, bt.SAPContext("ga-r", "sa-r"))
	requireStatus(t, http.StatusAccepted, b.Put("/oauth/cf-eu20/v2/service_instances/"+newID()+"?accepts_incomplete=true", body))
	r := b.Put("/oauth/cf-eu10/v2/service_instances/"+newID()+"?accepts_incomplete=true", bt.ProvisionBody(bt.TrialPlanID, map[string]any{"name": "t", "region": "westeurope"}, bt.SAPContext("ga-r2", "sa-r2")))
	requireStatus(t, http.StatusBadRequest, r)
	assert.Contains(t, r.Description(), "region")
	r = b.Put("/oauth/cf-eu11/v2/service_instances/"+newID()+"?accepts_incomplete=true", bt.ProvisionBody(bt.AWSPlanID, map[string]any{"name": "t", "region": "us-east-1"}, bt.SAPContext("ga-r3", "sa-r3")))
	requireStatus(t, http.StatusBadRequest, r)
	assert.Contains(t, r.Description(), "region")
}

func TestHealth(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	requireStatus(t, http.StatusOK, b.Get("/healthz", bt.WithoutAuth(), bt.WithoutAPIVersion()))
	requireStatus(t, http.StatusOK, b.Get("/readyz", bt.WithoutAuth(), bt.WithoutAPIVersion()))
	m := b.Get("/metrics", bt.WithoutAuth(), bt.WithoutAPIVersion())
	requireStatus(t, http.StatusOK, m)
}
