package httpretry_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/httpretry"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
)

func TestCallMetricsCountAnswersAndFailuresBySystem(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	reg := prometheus.NewRegistry()
	m, err := httpretry.NewCallMetrics(reg)
	require.NoError(t, err)
	avs := httpretry.NewHTTPClient(time.Second, m.Transport("avs", nil))
	ias := httpretry.NewHTTPClient(time.Second, m.Transport("ias", nil))

	for _, call := range []struct {
		c      *http.Client
		method string
		url    string
	}{
		{avs, http.MethodGet, srv.URL + "/ok"}, {avs, http.MethodGet, srv.URL + "/ok"}, {avs, http.MethodPost, srv.URL + "/busy"},
		{ias, http.MethodDelete, "http://" + sandboxtest.ClosedAddr(t) + "/x"},
	} {
		req, err := http.NewRequest(call.method, call.url, nil)
		require.NoError(t, err)
		if resp, err := call.c.Do(req); err == nil {
			resp.Body.Close()
		}
	}

	want := `
# HELP keb_external_requests_total Requests sent to external systems, by system, method and outcome (status code, or error when no answer came).
# TYPE keb_external_requests_total counter
keb_external_requests_total{method="DELETE",outcome="error",system="ias"} 1
keb_external_requests_total{method="GET",outcome="200",system="avs"} 2
keb_external_requests_total{method="POST",outcome="503",system="avs"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "keb_external_requests_total"))
	n, err := testutil.GatherAndCount(reg, "keb_external_request_duration_seconds")
	require.NoError(t, err)
	assert.Equal(t, 2, n, "one duration series per system")

	_, err = httpretry.NewCallMetrics(reg)
	assert.Error(t, err, "registering twice is refused")
}

func TestNilCallMetricsObserveNothing(t *testing.T) {
	var m *httpretry.CallMetrics
	assert.Equal(t, http.DefaultTransport, m.Transport("avs", nil))
	custom := &http.Transport{}
	assert.Same(t, custom, m.Transport("avs", custom))
	c := httpretry.NewHTTPClient(3*time.Second, nil)
	assert.Equal(t, 3*time.Second, c.Timeout)
	assert.Nil(t, c.Transport, "the default transport")
}
