package broker_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/latencyproxy"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// PostgreSQL behind a TCP proxy that delays every packet: a binding PUT and operator reads that
// cannot finish within the server's request deadline are answered 503 with Retry-After at the
// deadline (before a client's typical 30 s), and neither they nor a client that gives up first
// are logged as server failures. Back at normal speed, the binding is created.
func TestASlowDatabaseAnswers503BeforeTheClientGivesUp(t *testing.T) {
	const deadline = 2 * time.Second
	proxy, proxied := latencyproxy.ForURL(t, pgtest.NewDatabase(t))
	var log lockedBuffer
	b := bt.Start(t, bt.Options{DatabaseURL: proxied, NoSandbox: true, RequestTimeout: deadline, LogOutput: &log})
	id := newID()
	b.WaitSucceeded(id, b.Provision(id, "rt-slow", "ga-slow"))

	proxy.SetLatency(300 * time.Millisecond)
	bindingPath := "/v2/service_instances/" + id + "/service_bindings/" + newID() + "?accepts_incomplete=true"
	bind := map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSPlanID}
	start := time.Now()
	r := b.Put(bindingPath, bind)
	took := time.Since(start)
	t.Logf("binding PUT with 300 ms per packet: %d after %s", r.Status, took.Round(10*time.Millisecond))
	if r.Status == http.StatusServiceUnavailable {
		assert.Equal(t, "5", r.Header.Get("Retry-After"))
		assert.Less(t, took, deadline+time.Second, "answered at the deadline")
	} else {
		assert.Contains(t, []int{http.StatusOK, http.StatusCreated}, r.Status, r.String())
	}
	start = time.Now()
	r = b.Get("/runtimes")
	t.Logf("GET /runtimes with 300 ms per packet: %d after %s", r.Status, time.Since(start).Round(10*time.Millisecond))
	assert.NotEqual(t, http.StatusInternalServerError, r.Status, r.String())

	// A client that gives up after half a second.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	req := bt.NewRequest(t, http.MethodGet, b.URL+"/v2/service_instances/"+id, nil).WithContext(ctx)
	if resp, err := b.Client.Do(req); err == nil {
		resp.Body.Close()
	}
	cancel()
	for end := time.Now().Add(2 * deadline); log.count("the client went away before the answer") == 0; time.Sleep(20 * time.Millisecond) {
		require.True(t, time.Now().Before(end), "the abandoned request was not logged as such")
	}
	assert.Zero(t, log.count(`"level":"error"`), "no server failure logged")
	assert.Zero(t, log.count(`"msg":"request failed","path":"/v2/service_instances/`+id+`"`), "the client's own disconnect is not a failure")

	proxy.SetLatency(0)
	r = b.Put(bindingPath, bind)
	assert.Contains(t, []int{http.StatusOK, http.StatusCreated}, r.Status, r.String())
}
