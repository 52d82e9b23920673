package clientkit_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
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
	m, err := clientkit.NewCallMetrics(reg)
	require.NoError(t, err)
	avs := clientkit.NewHTTPClient(time.Second, m.Transport("avs", nil))
	ias := clientkit.NewHTTPClient(time.Second, m.Transport("ias", nil))

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

	_, err = clientkit.NewCallMetrics(reg)
	assert.Error(t, err, "registering twice is refused")
}

func TestNilCallMetricsObserveNothing(t *testing.T) {
	var m *clientkit.CallMetrics
	pooled, ok := m.Transport("avs", nil).(*http.Transport)
	require.True(t, ok, "a transport of the client's own")
	assert.Equal(t, clientkit.IdleConnsPerHost, pooled.MaxIdleConnsPerHost)
	assert.Equal(t, clientkit.ConnsPerHost, pooled.MaxConnsPerHost)
	custom := &http.Transport{}
	assert.Same(t, custom, m.Transport("avs", custom))
	// Each request is bounded through its context (TestARequestIsBoundedByTheClientsTimeout), not
	// by http.Client.Timeout, and goes through the default transport.
	c := clientkit.NewHTTPClient(3*time.Second, nil)
	assert.Zero(t, c.Timeout)
	assert.NotNil(t, c.Transport)
}

// Concurrent calls to one system reuse their connections: with http.DefaultTransport (2 idle
// per host) most of these rounds dialed anew.
func TestConcurrentCallsToOneSystemReuseConnections(t *testing.T) {
	var dialed atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "{}")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	m, err := clientkit.NewCallMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	c := clientkit.NewHTTPClient(5*time.Second, m.Transport("avs", nil))
	const parallel, rounds = 32, 20
	for range rounds {
		var wg sync.WaitGroup
		for range parallel {
			wg.Add(1)
			go func() {
				defer wg.Done()
				get(t, c, srv.URL)
			}()
		}
		wg.Wait()
	}
	// A connection goes back to the pool shortly after its body is closed, so a round can start
	// before the last one's are back and dial a few more (33 of 32 seen under load in CI); without
	// reuse it would be about rounds × (parallel - 2) = 600.
	assert.LessOrEqual(t, dialed.Load(), int64(2*parallel), "connections dialed for %d rounds of %d concurrent calls", rounds, parallel)
}

// A system gets at most ConnsPerHost calls at once from a client however many callers there
// are (the engine's workers are many more); the others wait for a connection and are served.
func TestCallsToOneSystemAreBoundedPerHost(t *testing.T) {
	var now, most atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := now.Add(1)
		defer now.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		_, _ = io.WriteString(w, "{}")
	}))
	defer srv.Close()
	var open sync.Once
	letGo := func() { open.Do(func() { close(release) }) }
	defer letGo() // before the server closes: a failed wait must not leave its handlers blocked

	m, err := clientkit.NewCallMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	c := clientkit.NewHTTPClient(30*time.Second, m.Transport("avs", nil))
	const callers = 3 * clientkit.ConnsPerHost
	var wg sync.WaitGroup
	var served atomic.Int64
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if get(t, c, srv.URL) {
				served.Add(1)
			}
		}()
	}
	require.Eventually(t, func() bool { return now.Load() == clientkit.ConnsPerHost }, 10*time.Second, 5*time.Millisecond,
		"the first %d calls reach the system", clientkit.ConnsPerHost)
	letGo()
	wg.Wait()
	assert.Equal(t, int64(callers), served.Load(), "every call is served")
	assert.Equal(t, int64(clientkit.ConnsPerHost), most.Load(), "calls at once")
}

// get calls url and reads the answer to its end, so the connection goes back to the pool;
// false when the call failed (reported to t).
func get(t *testing.T, c *http.Client, url string) bool {
	resp, err := c.Get(url)
	if !assert.NoError(t, err) {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return true
}
