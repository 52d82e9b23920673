package broker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/pivotal-cf/brokerapi/v10/domain/apiresponses"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/broker/auth"
	"github.com/kyma-project/kyma-environment-broker/internal/catalog"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
)

const (
	testUser = "broker"
	testPass = "test-password"
)

// lastOperationStore is a SQLite store with instances whose operations cover every answer.
func lastOperationStore(t *testing.T) storage.Store {
	t.Helper()
	ctx := context.Background()
	log, _ := logtest.NewNullLogger()
	store, err := driver.Open(ctx, driver.Config{Driver: driver.SQLite, Path: filepath.Join(t.TempDir(), "keb.db"), MaxOpenConns: 4}, log)
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	created := time.Now().Add(-time.Hour)
	for _, inst := range []struct {
		id  string
		ops []storage.Operation
	}{
		{"inst-a", []storage.Operation{
			{ID: "op-a-prov", Type: "provision", State: storage.StateSucceeded, Description: "operation succeeded"},
			{ID: "op-a-upd", Type: "update", State: storage.StateInProgress, Description: `waiting for "kyma" <ready> & \ done` + "\n\t\u2028 é \x01"},
		}},
		{"inst-b", []storage.Operation{{ID: "op-b-prov", Type: "provision", State: storage.StateFailed, Description: "x", LastError: "runtime creation failed: quota"}}},
		{"inst-c", []storage.Operation{{ID: "op-c-prov", Type: "provision", State: storage.StatePending}}},
		{"inst-none", nil},
	} {
		_, err := store.Instances().InsertInstance(ctx, storage.Instance{InstanceID: inst.id, RuntimeID: "rt-" + inst.id, GlobalAccountID: "ga", ServiceID: ServiceID, PlanID: "p"})
		require.NoError(t, err)
		for i, op := range inst.ops {
			op.InstanceID, op.CreatedAt, op.Deadline = inst.id, created.Add(time.Duration(i)*time.Minute), time.Now().Add(time.Hour)
			_, err := store.Operations().InsertOperation(ctx, op)
			require.NoError(t, err)
		}
	}
	return store
}

// answer is what a client sees and what the broker logged, without what differs per request
// (Date, generated IDs, lager session numbers, durations).
type answer struct {
	status int
	header http.Header
	body   string
	logs   []string
}

func serveBoth(t *testing.T, store storage.Store, level logrus.Level) (fast, ref func(*http.Request) answer) {
	t.Helper()
	loaded, err := catalog.FromConfig(catalog.Config{})
	require.NoError(t, err)
	catalog := NewCatalog(loaded)
	start := func(fastLastOperation bool) func(*http.Request) answer {
		log, hook := logtest.NewNullLogger()
		log.SetLevel(level)
		basic, err := auth.NewBasic(testUser, testPass, auth.WithLogger(log))
		require.NoError(t, err)
		b := New(store, catalog, nil, Config{OperationTimeout: time.Hour, DefaultRequestRegion: "cf-eu10"}, log)
		srv := httptest.NewServer(testRouter(b, basic, log, fastLastOperation))
		t.Cleanup(srv.Close)
		return func(req *http.Request) answer {
			hook.Reset()
			u, err := url.Parse(srv.URL)
			require.NoError(t, err)
			r := req.Clone(context.Background())
			r.URL.Scheme, r.URL.Host, r.Host, r.RequestURI = u.Scheme, u.Host, u.Host, ""
			if req.GetBody != nil {
				r.Body, err = req.GetBody()
				require.NoError(t, err)
			}
			resp, err := srv.Client().Do(r)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			h := resp.Header.Clone()
			h.Del("Date")
			if req.Header.Get("X-Broker-API-Request-Identity") == "" {
				assert.NotEmpty(t, h.Get("X-Broker-API-Request-Identity"), "a request ID is always given")
				h.Del("X-Broker-API-Request-Identity")
			}
			a := answer{status: resp.StatusCode, header: h, body: string(body)}
			for _, e := range hook.AllEntries() {
				data := logrus.Fields{}
				for k, v := range e.Data {
					switch k {
					case "session", "duration_ms", "remote":
						continue
					case "correlation-id":
						if correlationIDGenerated(req) {
							continue
						}
					case "request_id", "requestIdentity":
						if req.Header.Get("X-Broker-API-Request-Identity") == "" {
							continue
						}
					}
					if err, ok := v.(error); ok {
						v = err.Error()
					}
					data[k] = v
				}
				a.logs = append(a.logs, fmt.Sprintf("%s %s %v", e.Level, e.Message, data))
			}
			return a
		}
	}
	return start(true), start(false)
}

func correlationIDGenerated(req *http.Request) bool {
	for _, h := range correlationIDHeaders {
		if req.Header.Get(h) != "" {
			return false
		}
	}
	return true
}

func lastOpRequest(target string, opts ...func(*http.Request)) *http.Request {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	r.SetBasicAuth(testUser, testPass)
	r.Header.Set("X-Broker-API-Version", "2.16")
	r.Header.Set("X-Broker-API-Request-Identity", "req-1")
	for _, o := range opts {
		o(r)
	}
	return r
}

func header(k, v string) func(*http.Request) { return func(r *http.Request) { r.Header.Set(k, v) } }

// The direct last_operation handler answers every request as the router and brokerapi do:
// status, headers, body and log lines, at info (production) and debug level.
func TestLastOperationServerAnswersAsBrokerapi(t *testing.T) {
	store := lastOperationStore(t)
	const p = "/v2/service_instances/"
	requests := map[string]*http.Request{
		"succeeded":                          lastOpRequest(p + "inst-a/last_operation?operation=op-a-prov"),
		"in progress, description escaped":   lastOpRequest(p + "inst-a/last_operation?operation=op-a-upd"),
		"failed":                             lastOpRequest(p + "inst-b/last_operation?operation=op-b-prov"),
		"pending, no description":            lastOpRequest(p + "inst-c/last_operation?operation=op-c-prov"),
		"newest, no operation named":         lastOpRequest(p + "inst-a/last_operation"),
		"newest, operation empty":            lastOpRequest(p + "inst-a/last_operation?operation="),
		"unknown operation: the newest":      lastOpRequest(p + "inst-b/last_operation?operation=op-nope"),
		"instance without operations":        lastOpRequest(p + "inst-none/last_operation"),
		"unknown instance":                   lastOpRequest(p + "inst-x/last_operation?operation=op-a-prov"),
		"another instance's operation":       lastOpRequest(p + "inst-b/last_operation?operation=op-a-prov"),
		"plan and service IDs":               lastOpRequest(p + "inst-a/last_operation?service_id=s&plan_id=p&operation=op-a-prov"),
		"first operation wins":               lastOpRequest(p + "inst-a/last_operation?operation=op-a-prov&operation=op-a-upd"),
		"escaped operation":                  lastOpRequest(p + "inst-a/last_operation?operation=op%2Da%2Dprov"),
		"plus in operation":                  lastOpRequest(p + "inst-a/last_operation?operation=op+a"),
		"semicolon pair skipped":             lastOpRequest(p + "inst-a/last_operation?operation=op-a-upd;x&operation=op-a-prov"),
		"bad escape skipped":                 lastOpRequest(p + "inst-a/last_operation?operation=%zz&operation=op-a-prov"),
		"control character in operation":     lastOpRequest(p + "inst-a/last_operation?operation=op%0Ax"),
		"operation too long":                 lastOpRequest(p + "inst-a/last_operation?operation=" + strings.Repeat("o", 129)),
		"space in instance ID":               lastOpRequest(p + "a%20b/last_operation"),
		"escaped letter in instance ID":      lastOpRequest(p + "inst-%61/last_operation?operation=op-a-prov"),
		"dot-dot instance ID":                lastOpRequest(p + "../last_operation"),
		"empty instance ID":                  lastOpRequest(p + "/last_operation"),
		"trailing slash":                     lastOpRequest(p + "inst-a/last_operation/"),
		"no request ID":                      lastOpRequest(p+"inst-a/last_operation?operation=op-a-prov", func(r *http.Request) { r.Header.Del("X-Broker-API-Request-Identity") }),
		"no request ID, unknown instance":    lastOpRequest(p+"inst-x/last_operation", func(r *http.Request) { r.Header.Del("X-Broker-API-Request-Identity") }),
		"correlation ID":                     lastOpRequest(p+"inst-x/last_operation", header("X-Request-ID", "corr-1")),
		"no API version":                     lastOpRequest(p+"inst-a/last_operation", func(r *http.Request) { r.Header.Del("X-Broker-API-Version") }),
		"API version 3":                      lastOpRequest(p+"inst-a/last_operation", header("X-Broker-API-Version", "3.0")),
		"API version with suffix":            lastOpRequest(p+"inst-a/last_operation", header("X-Broker-API-Version", "2.17-rc1")),
		"API version with underscore":        lastOpRequest(p+"inst-a/last_operation", header("X-Broker-API-Version", "2.1_6")),
		"API version with space":             lastOpRequest(p+"inst-a/last_operation", header("X-Broker-API-Version", " 2. 16")),
		"API version negative minor":         lastOpRequest(p+"inst-a/last_operation", header("X-Broker-API-Version", "2.-1")),
		"API version not a number":           lastOpRequest(p+"inst-a/last_operation", header("X-Broker-API-Version", "two")),
		"no credentials":                     lastOpRequest(p+"inst-a/last_operation", func(r *http.Request) { r.Header.Del("Authorization") }),
		"wrong password":                     lastOpRequest(p+"inst-a/last_operation", func(r *http.Request) { r.SetBasicAuth(testUser, "nope") }),
		"lower-case basic scheme":            lastOpRequest(p+"inst-a/last_operation", func(r *http.Request) { r.Header.Set("Authorization", "basic "+r.Header.Get("Authorization")[6:]) }),
		"HEAD":                               lastOpRequest(p+"inst-a/last_operation", func(r *http.Request) { r.Method = http.MethodHead }),
		"POST":                               lastOpRequest(p+"inst-a/last_operation", func(r *http.Request) { r.Method = http.MethodPost }),
		"GET with a multipart body":          multipartGet(p + "inst-a/last_operation"),
		"binding last_operation (not fast)":  lastOpRequest(p + "inst-a/service_bindings/b-1/last_operation"),
		"oauth last_operation (not fast)":    lastOpRequest("/oauth/v2/service_instances/inst-a/last_operation?operation=op-a-prov"),
		"catalog (not fast)":                 lastOpRequest("/v2/catalog", header("If-None-Match", "*")),
		"other API (not fast)":               lastOpRequest("/v2/service_instances/inst-a/other"),
		"last_operation of a sub-path (not)": lastOpRequest(p + "inst-a/x/last_operation"),
	}
	// The requests the router hands to the direct handler (the rest are the reference's too).
	notDirect := []string{"escaped letter in instance ID", "dot-dot instance ID", "empty instance ID", "trailing slash", "HEAD", "POST",
		"GET with a multipart body", "binding last_operation (not fast)", "oauth last_operation (not fast)", "catalog (not fast)",
		"other API (not fast)", "last_operation of a sub-path (not)"}
	for name, req := range requests {
		_, direct := lastOperationInstance(req)
		assert.Equal(t, !slices.Contains(notDirect, name), direct, name)
	}
	for _, level := range []logrus.Level{logrus.InfoLevel, logrus.DebugLevel} {
		fast, ref := serveBoth(t, store, level)
		for name, req := range requests {
			t.Run(level.String()+"/"+name, func(t *testing.T) {
				want, got := ref(req), fast(req)
				assert.Equal(t, want.status, got.status)
				assert.Equal(t, want.header, got.header)
				assert.Equal(t, want.body, got.body)
				assert.Equal(t, want.logs, got.logs)
			})
		}
	}
	// A read that fails (the database is gone) is a 500 with brokerapi's body and lines too.
	store.Close()
	fast, ref := serveBoth(t, store, logrus.InfoLevel)
	req := lastOpRequest(p + "inst-a/last_operation?operation=op-a-prov")
	want, got := ref(req), fast(req)
	require.Equal(t, http.StatusInternalServerError, want.status, want.body)
	assert.Equal(t, want, got)
}

func multipartGet(target string) *http.Request {
	body := "--x\r\nContent-Disposition: form-data; name=\"operation\"\r\n\r\nop-a-upd\r\n--x--\r\n"
	r := httptest.NewRequest(http.MethodGet, target, strings.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
	r.Header.Set("Content-Type", "multipart/form-data; boundary=x")
	r.SetBasicAuth(testUser, testPass)
	r.Header.Set("X-Broker-API-Version", "2.16")
	r.Header.Set("X-Broker-API-Request-Identity", "req-1")
	return r
}

// The fast path's checks agree with Sscanf and url.ParseQuery, which decide everything else.
func FuzzAPIVersionAndPollQuery(f *testing.F) {
	for _, s := range []string{"2.16", "2.0", "2.", "2", "2.16abc", "2.1_6", "2.-1", "2.+1", " 2.16", "2. 16", "02.16", "3.1",
		"2.99999999999999999999", "2.123456789012345678", "2.1234567890123456789", "2.16\n", "2.\u00e9"} {
		f.Add(s)
	}
	for _, s := range []string{"operation=a&plan_id=b&service_id=c", "operation=a&operation=b", "a=1&operation=%41", "operation=a;b", "operation",
		"=x&operation=y", "operation=a+b", "&&operation=z&", "plan_id=&operation=%zz&operation=ok"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var major, minor int
		n, err := fmt.Sscanf(s, "%d.%d", &major, &minor)
		if isPlainVersion2(s) {
			require.True(t, err == nil && n == 2 && major == 2, "Sscanf refuses %q", s)
		}
		v, _ := url.ParseQuery(s)
		want := pollQuery{operation: v.Get("operation"), planID: v.Get("plan_id"), serviceID: v.Get("service_id")}
		require.Equal(t, want, parsePollQuery(s), "%q", s)
	})
}

// lastOperationBody is encoding/json's encoding of brokerapi's answer for every description.
func FuzzLastOperationBody(f *testing.F) {
	for _, s := range []string{"", "plain", `"quoted"`, `back\slash`, "<html>&", "new\nline", "\u2028", "\xff", "é", "\x7f", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, description string) {
		op := domain.LastOperation{State: domain.InProgress, Description: description}
		rec := httptest.NewRecorder()
		respondJSON(rec, http.StatusOK, "", apiresponses.LastOperationResponse{State: op.State, Description: op.Description})
		require.Equal(t, rec.Body.String(), string(lastOperationBody(op)))
	})
}
