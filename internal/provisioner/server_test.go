package provisioner_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/health"
	"github.com/kyma-project/kyma-environment-broker/internal/observe"
	"github.com/kyma-project/kyma-environment-broker/internal/observe/metricstest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/config"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/provisionertest"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
)

// The provisioner's /metrics, after a provisioning through its GraphQL API and status polls that
// carry the runtime's and operation's IDs: the HTTP request metrics by route template, method
// and code (as the broker's), and no label value names an ID (the broker's cardinality test).
func TestServerMetricsLabelsCarryNoID(t *testing.T) {
	env := provisionertest.New(t, provisionertest.Options{})
	reg := prometheus.NewRegistry()
	metrics, err := observe.NewHTTPMetrics(reg)
	require.NoError(t, err)
	schema, err := driver.LatestSchemaVersion(driver.Config{Driver: driver.SQLite})
	require.NoError(t, err)
	srv := httptest.NewServer(env.Provisioner.Server(health.New(env.Store, schema, reg), metrics))
	t.Cleanup(srv.Close)

	tenant := uuid.NewString()
	gql := client.NewGraphQL(srv.URL+"/graphql", srv.Client())
	in := gqlschema.ProvisionRuntimeInput{
		RuntimeInput: &gqlschema.RuntimeInput{Name: "counted", Labels: gqlschema.Labels{"subaccount": "sub-" + tenant}},
		ClusterConfig: &gqlschema.ClusterConfigInput{GardenerConfig: &gqlschema.GardenerConfigInput{
			KubernetesVersion: "1.30", Provider: "gcp", TargetSecret: "secret", Region: "europe-west3",
			MachineType: "n2-standard-4", WorkerCidr: "10.250.0.0/16", AutoScalerMin: 3, AutoScalerMax: 4, MaxSurge: 1,
			ProviderSpecificConfig: &gqlschema.ProviderSpecificInput{GCPConfig: &gqlschema.GCPProviderConfigInput{Zones: []string{"europe-west3-a"}}},
		}},
	}
	op, err := gql.ProvisionRuntime(t.Context(), tenant, in)
	require.NoError(t, err)
	require.NotNil(t, op.ID)
	require.NotNil(t, op.RuntimeID)
	require.Eventually(t, func() bool {
		st, err := gql.RuntimeOperationStatus(t.Context(), tenant, *op.ID)
		require.NoError(t, err)
		return st.State == gqlschema.OperationStateSucceeded
	}, time.Minute, 50*time.Millisecond)
	_, err = gql.RuntimeStatus(t.Context(), tenant, *op.RuntimeID)
	require.NoError(t, err)
	for _, path := range []string{"/healthz", "/runtimes/" + *op.RuntimeID} {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
	}

	families := metricstest.Scrape(t, srv.URL+"/metrics")
	metricstest.AssertNoIDs(t, families, tenant, *op.ID, *op.RuntimeID)
	for _, want := range []string{"keb_http_requests_total", "keb_http_request_duration_seconds"} {
		assert.Contains(t, families, want)
	}
	routes := metricstest.LabelValues(families, "keb_http_requests_total", "route")
	assert.Equal(t, map[string]bool{"/graphql": true, "/healthz": true, observe.Unmatched: true}, routes)
	codes := map[string]bool{}
	for _, m := range families["keb_http_requests_total"].GetMetric() {
		var route, method, code string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "route":
				route = l.GetValue()
			case "method":
				method = l.GetValue()
			case "code":
				code = l.GetValue()
			}
		}
		codes[strings.Join([]string{method, route, code}, " ")] = true
	}
	assert.True(t, codes["POST /graphql 200"], "%v", codes)
	assert.True(t, codes["GET unmatched 404"], "%v", codes)
}

// A playground on "/" (APP_PLAYGROUND_API_ENDPOINT) is a route of its own, not a second catch-all.
func TestServerPlaygroundOnRoot(t *testing.T) {
	cfg, err := config.Load()
	require.NoError(t, err)
	cfg.PlaygroundAPIEndpoint = "/"
	env := provisionertest.New(t, provisionertest.Options{Config: &cfg})
	reg := prometheus.NewRegistry()
	metrics, err := observe.NewHTTPMetrics(reg)
	require.NoError(t, err)
	srv := httptest.NewServer(env.Provisioner.Server(http.NotFoundHandler(), metrics))
	t.Cleanup(srv.Close)
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/html")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	families, err := reg.Gather()
	require.NoError(t, err)
	var routes []string
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if f.GetName() == "keb_http_requests_total" && l.GetName() == "route" {
					routes = append(routes, l.GetValue())
				}
			}
		}
	}
	assert.Equal(t, []string{"/"}, routes)
}
