package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
)

// fakeService records the calls it gets and answers with err, or with a canned result.
type fakeService struct {
	mu    sync.Mutex
	calls []call
	err   error
	panic bool
}

type call struct {
	method, tenant, id string
	config             any
}

var _ client.Client = (*fakeService)(nil)

func (f *fakeService) record(method, tenant, id string, config any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call{method: method, tenant: tenant, id: id, config: config})
	if f.panic {
		panic("boom")
	}
	return f.err
}

func (f *fakeService) recorded() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

func status(op gqlschema.OperationType, runtimeID string) *gqlschema.OperationStatus {
	id := "op-1"
	return &gqlschema.OperationStatus{ID: &id, Operation: op, State: gqlschema.OperationStateInProgress, RuntimeID: &runtimeID}
}

func (f *fakeService) ProvisionRuntime(_ context.Context, tenant string, config gqlschema.ProvisionRuntimeInput) (*gqlschema.OperationStatus, error) {
	if err := f.record("ProvisionRuntime", tenant, "", config); err != nil {
		return nil, err
	}
	return status(gqlschema.OperationTypeProvision, "rt-1"), nil
}

func (f *fakeService) DeprovisionRuntime(_ context.Context, tenant, runtimeID string) (string, error) {
	if err := f.record("DeprovisionRuntime", tenant, runtimeID, nil); err != nil {
		return "", err
	}
	return "op-2", nil
}

func (f *fakeService) UpgradeRuntime(_ context.Context, tenant, runtimeID string, config gqlschema.UpgradeRuntimeInput) (*gqlschema.OperationStatus, error) {
	if err := f.record("UpgradeRuntime", tenant, runtimeID, config); err != nil {
		return nil, err
	}
	return status(gqlschema.OperationTypeUpgrade, runtimeID), nil
}

func (f *fakeService) UpgradeShoot(_ context.Context, tenant, runtimeID string, config gqlschema.UpgradeShootInput) (*gqlschema.OperationStatus, error) {
	if err := f.record("UpgradeShoot", tenant, runtimeID, config); err != nil {
		return nil, err
	}
	return status(gqlschema.OperationTypeUpgradeShoot, runtimeID), nil
}

func (f *fakeService) HibernateRuntime(_ context.Context, tenant, runtimeID string) (*gqlschema.OperationStatus, error) {
	if err := f.record("HibernateRuntime", tenant, runtimeID, nil); err != nil {
		return nil, err
	}
	return status(gqlschema.OperationTypeHibernate, runtimeID), nil
}

func (f *fakeService) ReconnectRuntimeAgent(_ context.Context, tenant, runtimeID string) (string, error) {
	if err := f.record("ReconnectRuntimeAgent", tenant, runtimeID, nil); err != nil {
		return "", err
	}
	return "op-3", nil
}

func (f *fakeService) CreateRuntimeCredentials(_ context.Context, tenant, runtimeID, name string, expirationSeconds int) (*gqlschema.RuntimeCredentials, error) {
	if err := f.record("CreateRuntimeCredentials", tenant, runtimeID, map[string]any{"name": name, "expirationSeconds": expirationSeconds}); err != nil {
		return nil, err
	}
	return &gqlschema.RuntimeCredentials{Kubeconfig: "kubeconfig of " + name, ExpiresAt: "2026-01-02T03:04:05Z"}, nil
}

func (f *fakeService) RevokeRuntimeCredentials(_ context.Context, tenant, runtimeID, name string) (string, error) {
	if err := f.record("RevokeRuntimeCredentials", tenant, runtimeID, name); err != nil {
		return "", err
	}
	return name, nil
}

func (f *fakeService) RuntimeStatus(_ context.Context, tenant, runtimeID string) (*gqlschema.RuntimeStatus, error) {
	if err := f.record("RuntimeStatus", tenant, runtimeID, nil); err != nil {
		return nil, err
	}
	version := "2.0.0"
	return &gqlschema.RuntimeStatus{
		LastOperationStatus: status(gqlschema.OperationTypeProvision, runtimeID),
		RuntimeConfiguration: &gqlschema.RuntimeConfig{
			KymaConfig: &gqlschema.KymaConfig{Version: &version},
		},
	}, nil
}

func (f *fakeService) RuntimeConfiguration(_ context.Context, tenant, runtimeID string) (*gqlschema.RuntimeConfig, error) {
	if err := f.record("RuntimeConfiguration", tenant, runtimeID, nil); err != nil {
		return nil, err
	}
	version := "2.0.0"
	return &gqlschema.RuntimeConfig{KymaConfig: &gqlschema.KymaConfig{Version: &version}}, nil
}

func (f *fakeService) RuntimeOperationStatus(_ context.Context, tenant, operationID string) (*gqlschema.OperationStatus, error) {
	if err := f.record("RuntimeOperationStatus", tenant, operationID, nil); err != nil {
		return nil, err
	}
	return status(gqlschema.OperationTypeProvision, "rt-1"), nil
}

type gqlResponse struct {
	Data   map[string]json.RawMessage `json:"data"`
	Errors []struct {
		Message    string         `json:"message"`
		Path       []any          `json:"path"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
}

func post(t *testing.T, h http.Handler, tenant, query string, variables map[string]any) gqlResponse {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": variables})
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if tenant != "" {
		req.Header.Set(TenantHeader, tenant)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var resp gqlResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp), "body: %s", rec.Body.String())
	return resp
}

const provisionMutation = `mutation($config: ProvisionRuntimeInput!) {
  provisionRuntime(config: $config) { id operation state runtimeID }
}`

func provisionInput() gqlschema.ProvisionRuntimeInput {
	return gqlschema.ProvisionRuntimeInput{
		RuntimeInput: &gqlschema.RuntimeInput{Name: "rt", Labels: gqlschema.Labels{"account": "a1", "list": []any{"x", "y"}}},
		ClusterConfig: &gqlschema.ClusterConfigInput{GardenerConfig: &gqlschema.GardenerConfigInput{
			KubernetesVersion: "1.30", Provider: "gcp", TargetSecret: "secret", Region: "europe-west3",
			MachineType: "n2-standard-4", WorkerCidr: "10.250.0.0/16", AutoScalerMin: 3, AutoScalerMax: 4,
			MaxSurge: 1, MaxUnavailable: 0,
			ProviderSpecificConfig: &gqlschema.ProviderSpecificInput{GCPConfig: &gqlschema.GCPProviderConfigInput{Zones: []string{"europe-west3-a"}}},
		}},
	}
}

func variables(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

func newTestHandler(svc client.Client, cfg Config) (http.Handler, *logtest.Hook) {
	log, hook := logtest.NewNullLogger()
	return NewHandler(svc, cfg, log), hook
}

func TestProvisionRuntime(t *testing.T) {
	svc := &fakeService{}
	h, _ := newTestHandler(svc, Config{})

	resp := post(t, h, "tenant-1", provisionMutation, map[string]any{"config": variables(t, provisionInput())})

	require.Empty(t, resp.Errors)
	assert.JSONEq(t, `{"id":"op-1","operation":"Provision","state":"InProgress","runtimeID":"rt-1"}`, string(resp.Data["provisionRuntime"]))
	calls := svc.recorded()
	require.Len(t, calls, 1)
	assert.Equal(t, "tenant-1", calls[0].tenant)
	assert.Equal(t, provisionInput(), calls[0].config)
}

func TestProvisionRuntimeRequiresTenant(t *testing.T) {
	svc := &fakeService{}
	h, _ := newTestHandler(svc, Config{})

	resp := post(t, h, "", provisionMutation, map[string]any{"config": variables(t, provisionInput())})

	require.Len(t, resp.Errors, 1)
	assert.Equal(t, "BAD_REQUEST", resp.Errors[0].Extensions["code"])
	assert.Equal(t, TenantHeader, resp.Errors[0].Extensions["field"])
	assert.Contains(t, resp.Errors[0].Message, `"tenant" header`)
	assert.Equal(t, []any{"provisionRuntime"}, resp.Errors[0].Path)
	assert.Empty(t, svc.recorded())
}

func TestCallsPassTheTenantThrough(t *testing.T) {
	for name, tc := range map[string]struct {
		query  string
		method string
	}{
		"runtimeStatus":        {`query { runtimeStatus(id: "rt-1") { lastOperationStatus { id } } }`, "RuntimeStatus"},
		"runtimeConfiguration": {`query { runtimeStatus(id: "rt-1") { __typename runtimeConfiguration { kubeconfig } } }`, "RuntimeConfiguration"},
		"runtimeStatus with configuration": {`query { runtimeStatus(id: "rt-1") { runtimeConnectionStatus { status } runtimeConfiguration { kubeconfig } } }`,
			"RuntimeStatus"},
		"runtimeOperationStatus": {`query { runtimeOperationStatus(id: "rt-1") { id } }`, "RuntimeOperationStatus"},
		"deprovisionRuntime":     {`mutation { deprovisionRuntime(id: "rt-1") }`, "DeprovisionRuntime"},
		"hibernateRuntime":       {`mutation { hibernateRuntime(id: "rt-1") { id } }`, "HibernateRuntime"},
		"reconnectRuntimeAgent":  {`mutation { reconnectRuntimeAgent(id: "rt-1") }`, "ReconnectRuntimeAgent"},
		"upgradeShoot": {`mutation { upgradeShoot(id: "rt-1", config: {gardenerConfig: {kubernetesVersion: "1.31"}}) { id } }`,
			"UpgradeShoot"},
		"upgradeRuntime": {`mutation { upgradeRuntime(id: "rt-1", config: {kymaConfig: {version: "2.1.0", components: []}}) { id } }`,
			"UpgradeRuntime"},
	} {
		t.Run(name, func(t *testing.T) {
			for _, tenant := range []string{"tenant-1", ""} {
				svc := &fakeService{}
				h, _ := newTestHandler(svc, Config{})

				resp := post(t, h, tenant, tc.query, nil)

				require.Empty(t, resp.Errors)
				calls := svc.recorded()
				require.Len(t, calls, 1)
				assert.Equal(t, tc.method, calls[0].method)
				assert.Equal(t, tenant, calls[0].tenant)
				assert.Equal(t, "rt-1", calls[0].id)
			}
		})
	}
}

func TestUpgradeShootInput(t *testing.T) {
	svc := &fakeService{}
	h, _ := newTestHandler(svc, Config{})

	resp := post(t, h, "t", `mutation($config: UpgradeShootInput!) { upgradeShoot(id: "rt-1", config: $config) { id } }`,
		map[string]any{"config": map[string]any{"gardenerConfig": map[string]any{"autoScalerMax": 7}, "administrators": []string{"admin@example.com"}}})

	require.Empty(t, resp.Errors)
	calls := svc.recorded()
	require.Len(t, calls, 1)
	max := 7
	assert.Equal(t, gqlschema.UpgradeShootInput{
		GardenerConfig: &gqlschema.GardenerUpgradeInput{AutoScalerMax: &max},
		Administrators: []string{"admin@example.com"},
	}, calls[0].config)
}

func TestAppErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		err        error
		extensions map[string]any
		message    string
	}{
		"not found": {
			err: apperr.NotFound("runtime %s not found", "rt-1"),
			extensions: map[string]any{"code": "NOT_FOUND", "reason": "runtime rt-1 not found",
				"error_code": float64(404), "error_component": "db - provisioner", "error_reason": "err_db_not_found"},
			message: "runtime rt-1 not found",
		},
		"conflict, wrapped": {
			err: fmt.Errorf("while checking runtime: %w", apperr.Conflict("operation op-0 in progress")),
			extensions: map[string]any{"code": "CONFLICT", "reason": "operation op-0 in progress",
				"error_code": float64(409), "error_component": "provisioner", "error_reason": ""},
			message: "operation op-0 in progress",
		},
		"bad request": {
			err: apperr.BadRequest("config.clusterConfig.gardenerConfig.autoScalerMin", "must not exceed autoScalerMax"),
			extensions: map[string]any{"code": "BAD_REQUEST", "reason": "must not exceed autoScalerMax",
				"field": "config.clusterConfig.gardenerConfig.autoScalerMin", "error_code": float64(400), "error_component": "provisioner", "error_reason": ""},
			message: "config.clusterConfig.gardenerConfig.autoScalerMin: must not exceed autoScalerMax",
		},
	} {
		t.Run(name, func(t *testing.T) {
			h, _ := newTestHandler(&fakeService{err: tc.err}, Config{})

			resp := post(t, h, "t", `query { runtimeStatus(id: "rt-1") { lastOperationStatus { id } } }`, nil)

			require.Len(t, resp.Errors, 1)
			assert.Equal(t, tc.extensions, resp.Errors[0].Extensions)
			assert.Equal(t, tc.message, resp.Errors[0].Message)
			assert.Equal(t, []any{"runtimeStatus"}, resp.Errors[0].Path)
		})
	}
}

func TestInternalErrorsAreNotDisclosed(t *testing.T) {
	for name, svc := range map[string]*fakeService{
		"error": {err: errors.New("password=hunter2 rejected by database")},
		"panic": {panic: true},
	} {
		t.Run(name, func(t *testing.T) {
			h, hook := newTestHandler(svc, Config{})

			resp := post(t, h, "t", `mutation { deprovisionRuntime(id: "rt-1") }`, nil)

			require.Len(t, resp.Errors, 1)
			assert.Equal(t, "internal error", resp.Errors[0].Message)
			assert.Equal(t, map[string]any{"code": "INTERNAL", "reason": "internal error",
				"error_code": float64(500), "error_component": "provisioner", "error_reason": "err_provisioner_internal"}, resp.Errors[0].Extensions)
			assert.Equal(t, []any{"deprovisionRuntime"}, resp.Errors[0].Path)
			require.NotEmpty(t, hook.AllEntries())
			assert.Equal(t, logrus.ErrorLevel, hook.LastEntry().Level)
		})
	}
}

func TestRequestErrorsAreBadRequests(t *testing.T) {
	h, _ := newTestHandler(&fakeService{}, Config{})

	t.Run("variable of the wrong shape names the field", func(t *testing.T) {
		input := provisionInput()
		input.ClusterConfig.GardenerConfig.ProviderSpecificConfig = nil

		resp := post(t, h, "t", provisionMutation, map[string]any{"config": variables(t, input)})

		require.Len(t, resp.Errors, 1)
		assert.Equal(t, "BAD_REQUEST", resp.Errors[0].Extensions["code"])
		assert.Equal(t, "config.clusterConfig.gardenerConfig.providerSpecificConfig", resp.Errors[0].Extensions["field"])
	})
	t.Run("list elements are indexed", func(t *testing.T) {
		config := map[string]any{"kymaConfig": map[string]any{"version": "2.0.0", "components": []any{map[string]any{"component": "c"}}}}

		resp := post(t, h, "t", `mutation($config: UpgradeRuntimeInput!) { upgradeRuntime(id: "rt-1", config: $config) { id } }`,
			map[string]any{"config": config})

		require.Len(t, resp.Errors, 1)
		assert.Equal(t, "BAD_REQUEST", resp.Errors[0].Extensions["code"])
		assert.Equal(t, "config.kymaConfig.components[0].namespace", resp.Errors[0].Extensions["field"])
	})
	t.Run("labels that are no object", func(t *testing.T) {
		config := variables(t, provisionInput())
		config["runtimeInput"].(map[string]any)["labels"] = "account=a1"

		resp := post(t, h, "t", provisionMutation, map[string]any{"config": config})

		require.Len(t, resp.Errors, 1)
		assert.Equal(t, "BAD_REQUEST", resp.Errors[0].Extensions["code"], resp.Errors[0])
		assert.Equal(t, "config.runtimeInput.labels", resp.Errors[0].Extensions["field"])
	})
	t.Run("invalid query", func(t *testing.T) {
		resp := post(t, h, "t", `query { runtimeStatus(id: "rt-1") { noSuchField } }`, nil)

		require.Len(t, resp.Errors, 1)
		assert.Equal(t, "BAD_REQUEST", resp.Errors[0].Extensions["code"])
		assert.NotContains(t, resp.Errors[0].Extensions, "field")
	})
	t.Run("unparsable body", func(t *testing.T) {
		req := httptest.NewRequest(http.MethodPost, "/graphql", strings.NewReader("{"))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		var resp gqlResponse
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp))
		require.Len(t, resp.Errors, 1)
		assert.Equal(t, "BAD_REQUEST", resp.Errors[0].Extensions["code"])
	})
}

func TestRuntimeStatus(t *testing.T) {
	h, _ := newTestHandler(&fakeService{}, Config{})

	resp := post(t, h, "t", `query { runtimeStatus(id: "rt-1") { lastOperationStatus { operation runtimeID } runtimeConfiguration { kymaConfig { version } clusterConfig { name } } } }`, nil)

	require.Empty(t, resp.Errors)
	assert.JSONEq(t, `{"lastOperationStatus":{"operation":"Provision","runtimeID":"rt-1"},"runtimeConfiguration":{"kymaConfig":{"version":"2.0.0"},"clusterConfig":null}}`,
		string(resp.Data["runtimeStatus"]))
}

// A query of the configuration alone is answered from the runtime alone, with the same answer.
func TestRuntimeStatusOfTheConfigurationAlone(t *testing.T) {
	svc := &fakeService{}
	h, _ := newTestHandler(svc, Config{})

	resp := post(t, h, "t", `query { runtimeStatus(id: "rt-1") { runtimeConfiguration { kymaConfig { version } } } }`, nil)

	require.Empty(t, resp.Errors)
	assert.JSONEq(t, `{"runtimeConfiguration":{"kymaConfig":{"version":"2.0.0"}}}`, string(resp.Data["runtimeStatus"]))
	require.Len(t, svc.recorded(), 1)
	assert.Equal(t, "RuntimeConfiguration", svc.recorded()[0].method)
}

func get(t *testing.T, h http.Handler, path, accept string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func isPlayground(t *testing.T, resp *http.Response) bool {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") &&
		strings.Contains(string(body), "Runtime Provisioner")
}

func TestPlayground(t *testing.T) {
	t.Run("same path as the API", func(t *testing.T) {
		h, _ := newTestHandler(&fakeService{}, Config{})

		assert.True(t, isPlayground(t, get(t, h, "/graphql", "text/html,application/xhtml+xml")))
		assert.False(t, isPlayground(t, get(t, h, "/graphql", "application/json")))
		resp := post(t, h, "t", `query { runtimeOperationStatus(id: "op-1") { id } }`, nil)
		assert.Empty(t, resp.Errors)
	})
	t.Run("own path", func(t *testing.T) {
		h, _ := newTestHandler(&fakeService{}, Config{APIEndpoint: "/api/graphql", PlaygroundEndpoint: "/playground"})

		assert.True(t, isPlayground(t, get(t, h, "/playground", "text/html")))
		assert.False(t, isPlayground(t, get(t, h, "/api/graphql", "text/html")))
		assert.Equal(t, http.StatusNotFound, get(t, h, "/graphql", "text/html").StatusCode)
		assert.Equal(t, http.StatusNotFound, get(t, h, "/playground", "application/json").StatusCode)
	})
}
