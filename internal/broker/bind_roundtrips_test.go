package broker_test

import (
	"net/http"
	"testing"
	"time"

	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/latencyproxy"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxBindRoundTrips bounds the database round trips of a binding PUT (a new binding): the
// broker's one read and its insert, the provisioner's two reads of the runtime (4 measured);
// each costs a full network delay on a slow database. One more is allowed for a pooled
// connection checked on the way.
const maxBindRoundTrips = 5

// A binding PUT on PostgreSQL behind a TCP proxy that delays every packet: it makes at most
// maxBindRoundTrips round trips to the database (counted by the proxy, not timed), and with
// 2 s per packet it answers, created or 503 with Retry-After at the server's deadline, well
// before a client's 30 s.
func TestBindingPutRoundTrips(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	// The instance is provisioned by a broker of its own; the one measured runs no engine, so
	// that only the request talks to the database through the proxy.
	worker := bt.Start(t, bt.Options{DatabaseURL: dbURL, NoSandbox: true})
	id := newID()
	worker.WaitSucceeded(id, worker.Provision(id, "rt-trips", "ga-trips"))

	proxy, proxied := latencyproxy.ForURL(t, dbURL)
	const deadline = 10 * time.Second
	b := bt.Start(t, bt.Options{DatabaseURL: proxied, NoSandbox: true, NoEngine: true, RequestTimeout: deadline})
	bind := map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSPlanID}
	path := func() string {
		return "/v2/service_instances/" + id + "/service_bindings/" + newID() + "?accepts_incomplete=true"
	}
	// Warm up: the pool's connections and prepared statements are not what is measured.
	for i := 0; i < 2; i++ {
		r := b.Put(path(), bind)
		require.Equal(t, http.StatusCreated, r.Status, r.String())
	}

	proxy.SetLatency(20 * time.Millisecond)
	before := proxy.RoundTrips()
	start := time.Now()
	r := b.Put(path(), bind)
	trips, took := proxy.RoundTrips()-before, time.Since(start)
	require.Equal(t, http.StatusCreated, r.Status, r.String())
	t.Logf("binding PUT: %d database round trips, %s with 20 ms per packet", trips, took.Round(time.Millisecond))
	assert.LessOrEqual(t, trips, int64(maxBindRoundTrips), "database round trips of one binding PUT")
	assert.Positive(t, trips, "the proxy saw the binding's queries")

	proxy.SetLatency(2 * time.Second)
	start = time.Now()
	r = b.Put(path(), bind)
	took = time.Since(start)
	t.Logf("binding PUT with 2 s per packet: %d after %s", r.Status, took.Round(time.Millisecond))
	assert.Less(t, took, 30*time.Second, "answered before a client's 30 s")
	if r.Status == http.StatusServiceUnavailable {
		assert.NotEmpty(t, r.Header.Get("Retry-After"))
	} else {
		assert.Equal(t, http.StatusCreated, r.Status, r.String())
	}
}
