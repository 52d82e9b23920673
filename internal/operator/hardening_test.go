package operator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	ot "github.com/kyma-project/kyma-environment-broker/internal/orchestration/orchestrationtest"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

// Regression tests of issue 38's operator API findings, through HTTP on SQLite and PostgreSQL.

func TestMain(m *testing.M) { pgtest.Main(m) }

// onBoth runs a test on a broker on SQLite and on PostgreSQL.
func onBoth(t *testing.T, o bt.Options, test func(t *testing.T, b *bt.Broker)) {
	t.Helper()
	for name, dbURL := range map[string]func(*testing.T) string{
		"sqlite":   func(*testing.T) string { return "" },
		"postgres": func(t *testing.T) string { return pgtest.NewDatabase(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := o
			o.DatabaseURL = dbURL(t)
			test(t, bt.Start(t, o))
		})
	}
}

// failedOrchestration stores an orchestration whose only operation failed (retry needs one).
func failedOrchestration(t *testing.T, b *bt.Broker) (string, string) {
	t.Helper()
	inst := b.Provision(uuid.NewString(), "rt-retry", "ga-retry")
	id, opID := uuid.NewString(), uuid.NewString()
	now := time.Now().UTC()
	_, err := b.Store.Orchestrations().InsertOrchestration(context.Background(),
		storage.Orchestration{ID: id, Type: dto.UpgradeKyma, State: dto.Failed, Parameters: json.RawMessage(`{}`), CreatedAt: now},
		[]storage.OrchestrationOperation{{InstanceID: inst, RuntimeID: "rt", OperationID: opID, StoredState: storage.OrchOpFailed, DueAt: now}})
	require.NoError(t, err)
	return id, opID
}

// Item 1: every list parameter is bounded (400 naming it); 50,000 states answered 500 on SQLite.
func TestOperatorListParametersAreBounded(t *testing.T) {
	t.Parallel()
	onBoth(t, bt.Options{NoEngine: true}, func(t *testing.T, b *bt.Broker) {
		orch, _ := failedOrchestration(t, b)
		for _, n := range []int{101, 50_000} {
			states := strings.TrimSuffix(strings.Repeat("pending,", n), ",")
			for _, path := range []string{"/orchestrations", "/orchestrations/" + orch + "/operations", "/info/orphans", "/runtimes", "/events"} {
				param := "state"
				if path == "/events" {
					param = "type"
				}
				r := b.Get(path + "?" + param + "=" + states)
				require.Equal(t, http.StatusBadRequest, r.Status, "%s with %d values: %.200s", path, n, r)
				assert.Contains(t, r.Description(), param+": at most 100 values", path)
			}
		}
		ids := make([]string, 40_000)
		for i := range ids {
			ids[i] = fmt.Sprintf("x%d", i)
		}
		r := b.Do(http.MethodPut, "/orchestrations/"+orch+"/retry", map[string]any{"operationIDs": ids})
		require.Equal(t, http.StatusBadRequest, r.Status, "%.200s", r)
		assert.Contains(t, r.Description(), "operationIDs: at most 1000")
		// Within the bound, unknown IDs are named, not a database error.
		r = b.Do(http.MethodPut, "/orchestrations/"+orch+"/retry", map[string]any{"operationIDs": ids[:1000]})
		require.Equal(t, http.StatusBadRequest, r.Status, "%.200s", r)
		assert.Contains(t, r.Description(), "operationIDs: not failed operations")
	})
}

// Item 2: a query net/url cannot parse (more than 10,000 parameters, bad escapes, semicolons)
// dropped every filter: /runtimes?account=nobody x 10,001 listed every runtime. Now 400, on
// every route.
func TestUnparseableQueriesAreRefused(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	b.Provision(uuid.NewString(), "rt-q", "ga-q")
	many := strings.TrimSuffix(strings.Repeat("account=nobody&", 10_001), "&")
	for _, path := range []string{"/runtimes", "/events", "/orchestrations", "/info/orphans", "/info/runtimes", "/v2/catalog", "/oauth/v2/catalog",
		"/v2/service_instances/x/last_operation", "/console/", "/healthz", "/openapi.yaml"} {
		for name, q := range map[string]string{"10,001 parameters": many, "bad escape": "account=%zz", "semicolon": "account=a;b"} {
			r := b.Get(path + "?" + q)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s %s: %.200s", path, name, r)
			assert.Contains(t, r.Description(), "query:", "%s %s", path, name)
		}
	}
	// 10,000 parameters parse, and the filter holds.
	r := b.Get("/runtimes?" + strings.TrimSuffix(strings.Repeat("page=1&", 10_000), "&"))
	require.Equal(t, http.StatusOK, r.Status, "%.200s", r)
	var page runtime.Page
	r = b.Get("/runtimes?account=nobody")
	r.JSON(t, &page)
	assert.Zero(t, page.TotalCount)
}

// Item 3: upgrade versions are checked as provisioning checks kymaVersion (they reached the
// Reconciler with "../", NUL, "<script>", newlines and 100,000 characters).
func TestUpgradeVersionsAreValidated(t *testing.T) {
	t.Parallel()
	onBoth(t, bt.Options{NoEngine: true}, func(t *testing.T, b *bt.Broker) {
		all := map[string]any{"include": []any{map[string]any{"target": "all"}}}
		for _, bad := range []string{"../2.0", "2.0\x00", "<script>", "2.0\nX", strings.Repeat("1", 100_000), " "} {
			for _, c := range []struct {
				path, field string
				body        map[string]any
			}{
				{"/upgrade/kyma", "kyma.version", map[string]any{"kyma": map[string]any{"version": bad}}},
				{"/upgrade/cluster", "kubernetes.kubernetesVersion", map[string]any{"kubernetes": map[string]any{"kubernetesVersion": bad}}},
				{"/upgrade/cluster", "kubernetes.machineImageVersion", map[string]any{"kubernetes": map[string]any{"kubernetesVersion": "1.31", "machineImageVersion": bad}}},
			} {
				c.body["targets"] = all
				r := b.Do(http.MethodPost, c.path, c.body)
				require.Equal(t, http.StatusBadRequest, r.Status, "%s %.40q: %.200s", c.path, bad, r)
				assert.Contains(t, r.Description(), c.field)
			}
		}
		r := b.Get("/orchestrations")
		var list dto.StatusResponseList
		r.JSON(t, &list)
		assert.Zero(t, list.TotalCount, "nothing refused was stored")
		r = b.Do(http.MethodPost, "/upgrade/kyma", map[string]any{"targets": all, "kyma": map[string]any{"version": "2.21.0-rc.1+build_7"}, "dryRun": true})
		assert.Equal(t, http.StatusAccepted, r.Status, "%s", r)
	})
}

// Item 7: RFC 3339 offsets are hours 00-23 and minutes 00-59; time.Parse takes +24:00.
func TestScheduleOffsetsOutOfRange(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	body := func(schedule string) map[string]any {
		return map[string]any{"targets": map[string]any{"include": []any{map[string]any{"target": "all"}}},
			"kyma": map[string]any{"version": "2.21.0"}, "dryRun": true, "strategy": map[string]any{"schedule": schedule}}
	}
	for _, bad := range []string{"2030-01-01T00:00:00+24:00", "2030-01-01T00:00:00-24:00", "2030-01-01T00:00:00+23:60", "2030-01-01T00:00:00+99:00"} {
		r := b.Do(http.MethodPost, "/upgrade/kyma", body(bad))
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", bad, r)
		assert.Contains(t, r.Description(), "strategy.schedule")
	}
	for _, good := range []string{"2030-01-01T00:00:00+23:59", "2030-01-01T00:00:00-00:00", "2030-01-01T00:00:00Z"} {
		r := b.Do(http.MethodPost, "/upgrade/kyma", body(good))
		assert.Equal(t, http.StatusAccepted, r.Status, "%s: %s", good, r)
	}
}

// Item 10: a successful retry wrote its status twice (net/http logged "superfluous
// response.WriteHeader"); the answer is one 202 with the JSON body.
func TestRetryWritesItsStatusOnce(t *testing.T) {
	t.Parallel()
	onBoth(t, bt.Options{NoEngine: true}, func(t *testing.T, b *bt.Broker) {
		var mu sync.Mutex
		var serverLog bytes.Buffer
		srv := httptest.NewUnstartedServer(b.Handler)
		srv.Config.ErrorLog = log.New(lockedWriter{&mu, &serverLog}, "", 0)
		srv.Start()
		defer srv.Close()
		orch, opID := failedOrchestration(t, b)
		req := bt.NewRequest(t, http.MethodPut, srv.URL+"/orchestrations/"+orch+"/retry", map[string]any{"operationIDs": []string{opID}})
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		var out dto.RetryResponse
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		assert.Len(t, out.RetriedOperations, 1)
		srv.Close() // the server's log is complete once it is closed
		mu.Lock()
		defer mu.Unlock()
		assert.NotContains(t, serverLog.String(), "superfluous")
	})
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Item 4: /runtimes?kyma_config=true showed the provisioning's Kyma version after a successful
// Kyma upgrade.
func TestKymaConfigFollowsAKymaUpgrade(t *testing.T) {
	t.Parallel()
	onBoth(t, bt.Options{}, func(t *testing.T, b *bt.Broker) {
		ids := ot.Fleet(t, b, 1, 1)
		version := func() string {
			var page runtime.Page
			r := b.Get("/runtimes?kyma_config=true&instance_id=" + url.QueryEscape(ids[0]))
			require.Equal(t, http.StatusOK, r.Status, "%s", r)
			r.JSON(t, &page)
			require.Len(t, page.Data, 1)
			var cfg struct {
				Version string `json:"version"`
			}
			require.NoError(t, json.Unmarshal(page.Data[0].KymaConfig, &cfg), "%s", page.Data[0].KymaConfig)
			return cfg.Version
		}
		assert.Equal(t, "2.20.0", version(), "the provisioning's")
		id := ot.UpgradeKyma(t, b, "2.21.0", 1, map[string]any{"target": "all"})
		st := ot.Wait(t, b, id, 2*time.Minute, nil, nil)
		require.Equal(t, dto.Succeeded, st.State, st.Description)
		assert.Equal(t, "2.21.0", version(), "the upgrade's")
	})
}

// operatorRoutes are every route of the operator API (operator.New), with IDs filled in.
func operatorRoutes(orch, opID, inst string) [][2]string {
	return [][2]string{
		{http.MethodGet, "/runtimes"}, {http.MethodGet, "/events"}, {http.MethodPost, "/upgrade/kyma"}, {http.MethodPost, "/upgrade/cluster"},
		{http.MethodPut, "/expire/service_instance/" + inst}, {http.MethodGet, "/kubeconfig/" + inst}, {http.MethodGet, "/info/runtimes"},
		{http.MethodGet, "/info/orphans"}, {http.MethodGet, "/orchestrations"}, {http.MethodGet, "/orchestrations/" + orch},
		{http.MethodGet, "/orchestrations/" + orch + "/operations"}, {http.MethodGet, "/orchestrations/" + orch + "/operations/" + opID},
		{http.MethodPut, "/orchestrations/" + orch + "/cancel"}, {http.MethodPut, "/orchestrations/" + orch + "/retry"},
	}
}

// The hostile probes of issue 38 on every operator route: unparseable queries, lists of
// 50,000 values, hostile bodies. No answer is a 5xx, every error is a JSON object, and
// a query that does not parse is 400 before any handler.
func TestHostileProbesOnEveryOperatorRoute(t *testing.T) {
	t.Parallel()
	onBoth(t, bt.Options{NoEngine: true}, func(t *testing.T, b *bt.Broker) {
		orch, opID := failedOrchestration(t, b)
		inst := uuid.NewString()
		many := strings.TrimSuffix(strings.Repeat("state=x&", 10_001), "&")
		list := "state=" + strings.TrimSuffix(strings.Repeat("x,", 50_000), ",")
		bodies := []any{nil, `{"a":`, `[]`, `null`, strings.Repeat("[", 10_000), map[string]any{"operationIDs": []any{nil, 7}},
			map[string]any{"kyma": map[string]any{"version": "../\x00<script>"}, "targets": "all"}}
		routes := operatorRoutes(orch, opID, inst)
		require.Len(t, routes, 14, "every route of operator.New")
		for _, rt := range routes {
			for _, q := range []string{many, "a=%zz", "a=1;b=2"} {
				r := b.Do(rt[0], rt[1]+"?"+q, nil)
				assert.Equal(t, http.StatusBadRequest, r.Status, "%s %s?%.20s: %.200s", rt[0], rt[1], q, r)
			}
			r := b.Do(rt[0], rt[1]+"?"+list, nil)
			assert.Less(t, r.Status, 500, "%s %s with 50,000 values: %.200s", rt[0], rt[1], r)
			for _, body := range bodies {
				r := b.Do(rt[0], rt[1], body)
				assert.Less(t, r.Status, 500, "%s %s %.40v: %.200s", rt[0], rt[1], body, r)
				if r.Status >= 400 {
					var v map[string]any
					assert.NoError(t, json.Unmarshal(r.Body, &v), "%s %s: an error is a JSON object: %.200s", rt[0], rt[1], r)
				} else if !strings.HasPrefix(rt[1], "/kubeconfig") {
					assert.True(t, json.Valid(r.Body), "%s %s: JSON: %.200s", rt[0], rt[1], r)
				}
			}
		}
	})
}
