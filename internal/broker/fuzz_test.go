package broker_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// serve sends one request straight to the router (no network) and returns the recorder.
func serve(t testing.TB, b *bt.Broker, method, path string, body []byte) *httptest.ResponseRecorder {
	req := bt.NewRequest(t, method, "http://broker"+path, body)
	rec := httptest.NewRecorder()
	b.Handler.ServeHTTP(rec, req)
	return rec
}

// checkAnswer fails on a 5xx or an answer that is not a JSON object.
func checkAnswer(t *testing.T, what string, body []byte, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code >= 500 {
		t.Fatalf("%s %q: %d %s", what, body, rec.Code, rec.Body)
	}
	var v map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("%s %q: %d with a body that is not a JSON object: %q", what, body, rec.Code, rec.Body)
	}
}

func provisionSeeds() [][]byte {
	valid := func(planID string, params, ctx map[string]any) []byte {
		raw, _ := json.Marshal(bt.ProvisionBody(planID, params, ctx))
		return raw
	}
	ctx := bt.SAPContext("ga-fuzz", "sa-fuzz")
	return [][]byte{
		valid(bt.AWSPlanID, bt.AWSParams("fuzz"), ctx),
		valid(bt.AWSPlanID, map[string]any{"name": "fuzz", "region": "eu-central-1", "machineType": "m6i.xlarge", "autoScalerMin": 4, "autoScalerMax": 8,
			"administrators": []string{"a@example.com"}, "networking": map[string]any{"nodes": "10.250.0.0/20", "pods": "10.96.0.0/13", "services": "10.104.0.0/13"},
			"oidc": map[string]any{"clientID": "c", "issuerURL": "https://issuer.example.com", "signingAlgs": []string{"RS256"}}, "kymaVersion": "2.20.0"}, ctx),
		valid(bt.TrialPlanID, map[string]any{"name": "t"}, ctx),
		valid(bt.FreePlanID, map[string]any{"name": "f", "region": "eu-central-1"}, ctx),
		valid(bt.AWSPlanID, bt.AWSParams("fuzz"), map[string]any{"platform": "kubernetes", "namespace": "ns", "clusterid": "c"}),
		[]byte(`{"service_id":"` + bt.ServiceID + `","plan_id":"` + bt.AWSPlanID + `","organization_guid":"o","space_guid":"s","context":{"platform":"cloudfoundry"},"parameters":{"name":"cf","region":"eu-central-1"}}`),
		valid(bt.AWSPlanID, map[string]any{"name": "x", "region": "eu-central-1", "modules": map[string]any{"default": true}}, ctx),
		valid(bt.AWSPlanID, map[string]any{"name": "bad name!", "region": "mars-1", "autoScalerMin": 30, "autoScalerMax": 4}, ctx),
		valid(bt.AWSPlanID, bt.AWSParams("fuzz"), map[string]any{}),
		[]byte(`{"service_id":"` + bt.ServiceID + `","plan_id":"` + bt.AWSPlanID + `","parameters":{"name":"n","region":"eu-central-1","autoScalerMin":1e400},"context":{"globalaccount_id":"g","subaccount_id":"s"}}`),
		[]byte(`{"service_id":"` + bt.ServiceID + `","plan_id":"` + bt.AWSPlanID + `","parameters":null,"context":null}`),
		[]byte(`{"service_id":"` + bt.ServiceID + `","plan_id":"` + bt.AWSPlanID + `","parameters":[],"context":"x"}`),
		[]byte(`{"service_id":"` + bt.ServiceID + `","plan_id":"` + bt.AWSPlanID + `","parameters":{"networking":{"nodes":"::1/64"}},"context":{"globalaccount_id":1}}`),
		// Hostile context IDs (issue 10): control characters, and a null context with CF's body fields.
		[]byte(`{"service_id":"` + bt.ServiceID + `","plan_id":"` + bt.AWSPlanID + `","parameters":{"name":"n","region":"eu-central-1"},"context":{"globalaccount_id":"g\u0000\n\u001b","subaccount_id":"s"}}`),
		[]byte(`{"service_id":"` + bt.ServiceID + `","plan_id":"` + bt.AWSPlanID + `","organization_guid":"o","space_guid":"s","context":null,"parameters":{"name":"cf","region":"eu-central-1"}}`),
		[]byte(`{"service_id":"` + bt.ServiceID + `","plan_id":"` + bt.AWSPlanID + `","parameters":{"name":"n","region":"eu-central-1"},"context":{"globalaccount_id":"g","subaccount_id":"s"}}garbage`),
		[]byte(`{"service_id": 1}`),
		[]byte(`{`),
		[]byte(`null`),
		[]byte(``),
		[]byte(`[]`),
	}
}

// FuzzProvisionBody: no provisioning body makes the broker answer 5xx or panic, and a body
// it accepts is idempotent (the same body again gets the same operation).
func FuzzProvisionBody(f *testing.F) {
	for _, s := range provisionSeeds() {
		f.Add(s)
	}
	b := bt.Start(f, bt.Options{NoEngine: true})
	f.Fuzz(func(t *testing.T, body []byte) {
		path := bt.InstancePath(newID())
		rec := serve(t, b, http.MethodPut, path, body)
		checkAnswer(t, "provision", body, rec)
		switch rec.Code {
		case http.StatusAccepted:
			var first struct{ Operation string }
			_ = json.Unmarshal(rec.Body.Bytes(), &first)
			again := serve(t, b, http.MethodPut, path, body)
			checkAnswer(t, "repeated provision", body, again)
			var second struct{ Operation string }
			_ = json.Unmarshal(again.Body.Bytes(), &second)
			if again.Code != http.StatusAccepted || first.Operation == "" || first.Operation != second.Operation {
				t.Fatalf("repeat of %q: %d %s after %s", body, again.Code, again.Body, rec.Body)
			}
		case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusConflict:
		default:
			t.Fatalf("provision %q: unexpected %d %s", body, rec.Code, rec.Body)
		}
	})
}

func updateSeeds() [][]byte {
	return [][]byte{
		[]byte(`{"service_id":"` + bt.ServiceID + `","plan_id":"` + bt.AWSHAPlanID + `"}`),
		[]byte(`{"service_id":"` + bt.ServiceID + `","plan_id":"` + bt.GCPPlanID + `"}`),
		[]byte(`{"service_id":"` + bt.ServiceID + `","parameters":{"autoScalerMin":4,"autoScalerMax":10,"machineType":"m6i.xlarge"}}`),
		[]byte(`{"service_id":"` + bt.ServiceID + `","parameters":{"administrators":["a@example.com"],"oidc":{"clientID":"c","issuerURL":"https://i.example.com"}}}`),
		[]byte(`{"service_id":"` + bt.ServiceID + `","parameters":{"region":"us-east-1"}}`),
		[]byte(`{"service_id":"` + bt.ServiceID + `","parameters":{"autoScalerMin":10,"autoScalerMax":3}}`),
		[]byte(`{"service_id":"` + bt.ServiceID + `","context":{"globalaccount_id":"ga-fuzz","active":false}}`),
		[]byte(`{"service_id":"` + bt.ServiceID + `","plan_id":"` + bt.AWSPlanID + `","previous_values":{"plan_id":"` + bt.AWSPlanID + `"},"maintenance_info":{"version":"1.0.0"}}`),
		[]byte(`{"service_id":"` + bt.ServiceID + `","parameters":null}`),
		[]byte(`{"service_id":"` + bt.ServiceID + `","parameters":"x"}`),
		[]byte(`{"service_id":"` + bt.ServiceID + `","parameters":{"autoScalerMax":1e400}}`),
		[]byte(`{"plan_id":"x"}`),
		[]byte(`{"service_id":5}`),
		[]byte(`{`),
		[]byte(``),
	}
}

// FuzzUpdateBody: no update body for a provisioned instance makes the broker answer 5xx or
// panic; an accepted update stores an update operation.
func FuzzUpdateBody(f *testing.F) {
	for _, s := range updateSeeds() {
		f.Add(s)
	}
	broker := bt.Start(f, bt.Options{NoEngine: true})
	provisionBody, _ := json.Marshal(bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("fuzz"), bt.SAPContext("ga-fuzz", "sa-fuzz")))
	f.Fuzz(func(t *testing.T, body []byte) {
		b := broker.For(t)
		id := newID()
		rec := serve(t, b, http.MethodPut, bt.InstancePath(id), provisionBody)
		if rec.Code != http.StatusAccepted {
			t.Fatalf("provisioning: %d %s", rec.Code, rec.Body)
		}
		var prov struct{ Operation string }
		_ = json.Unmarshal(rec.Body.Bytes(), &prov)
		b.FinishOperation(prov.Operation, storage.StateSucceeded)

		rec = serve(t, b, http.MethodPatch, bt.InstancePath(id), body)
		checkAnswer(t, "update", body, rec)
		switch rec.Code {
		case http.StatusAccepted:
			var upd struct{ Operation string }
			_ = json.Unmarshal(rec.Body.Bytes(), &upd)
			ops := b.Operations(id)
			if len(ops) != 2 || ops[0].ID != upd.Operation || ops[0].Type != "update" {
				t.Fatalf("update %q accepted as %q but the store has %+v", body, upd.Operation, ops)
			}
		case http.StatusOK:
			if n := len(b.Operations(id)); n != 1 {
				t.Fatalf("update %q answered 200 but stored %d operations", body, n)
			}
		case http.StatusBadRequest, http.StatusUnprocessableEntity:
		default:
			t.Fatalf("update %q: unexpected %d %s", body, rec.Code, bytes.TrimSpace(rec.Body.Bytes()))
		}
	})
}
