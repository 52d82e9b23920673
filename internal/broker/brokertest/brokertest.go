// Package brokertest starts the whole broker for tests, wired as cmd/broker's serve does it:
// storage (SQLite file or PostgreSQL), one step engine running the embedded provisioner's and
// the broker's processes on a fast simulated backend, basic auth, the OSB router, the operator
// endpoints and health, all behind an httptest server. Helpers send OSB requests with
// credentials and X-Broker-API-Version and wait for operations.
package brokertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/app"
	"github.com/kyma-project/kyma-environment-broker/internal/broker"
	"github.com/kyma-project/kyma-environment-broker/internal/broker/auth"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/externals"
	"github.com/kyma-project/kyma-environment-broker/internal/lifecycle"
	"github.com/kyma-project/kyma-environment-broker/internal/logging"
	"github.com/kyma-project/kyma-environment-broker/internal/orchestration"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/provisionertest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/sirupsen/logrus"
)

// Credentials of the harness's basic auth.
const (
	Username   = "broker"
	Password   = "s3cret-test-password"
	APIVersion = "2.16"
)

// IDs of the catalog in resources/plans.yaml.
const (
	ServiceID   = broker.ServiceID
	AWSPlanID   = "361c511f-f939-4621-b228-d0fb79a1fe15"
	AWSHAPlanID = "aecef2e6-49f1-4094-8433-eba0e135eb6a"
	AzurePlanID = "4deee563-e5ec-4731-b9b1-53b42d855f0c"
	GCPPlanID   = "ca6e5357-707f-4565-bbbd-b3ab732597c6"
	TrialPlanID = "7d55d31d-35ae-4438-bf13-6ffdfa107d9f"
	FreePlanID  = "b1a5764e-2ea1-4f95-94c0-2b4538b37b55"
)

// Options adjust Start; the zero value is SQLite in a temporary directory with a running engine.
type Options struct {
	// DatabaseURL, when set, runs on PostgreSQL at that URL (see pgtest.NewDatabase).
	DatabaseURL string
	// NoEngine leaves the step engine stopped: operations stay pending.
	NoEngine bool
	// DefaultRequestRegion of /v2 and /oauth/v2 [cf-eu10].
	DefaultRequestRegion string
	// FailureRate (0..1) is the share of runtimes whose creation the simulated backend fails;
	// 1 fails every provisioning. (Its failRuntimeNames match the cluster's shoot name, which
	// the broker leaves to the provisioner, not the runtime name of the parameters.)
	FailureRate float64
	// OperationTimeout is every operation's deadline [1m]; Workers the engine's workers [32].
	OperationTimeout time.Duration
	Workers          int
	// NoSandbox runs without external systems: their steps are skipped.
	NoSandbox bool
	// Sandbox adjusts the stand-ins of the external systems (credentials are the defaults).
	Sandbox standins.Options
	// Externals adjusts the external systems' configuration before the clients are built.
	Externals func(*externals.Config)
	// Clock, when set, is the operator API's time (expiry); the wall clock otherwise.
	Clock lifecycle.Clock
	// Orchestration adjusts the orchestration configuration (fast polls by default).
	Orchestration func(*orchestration.Config)
	// LogOutput, when set, receives the broker's log (JSON, debug level, through the same
	// redacting logger the broker process uses).
	LogOutput io.Writer
	// Backends, when set, is the embedded provisioner's backend set (APP_PROVISIONER_SET_JSON)
	// instead of the fast simulation; Clusters then reach the runtimes (real clusters).
	Backends string
	Clusters *runtimeclient.Clusters
	// RequestTimeout bounds every request (APP_HTTP_REQUEST_TIMEOUT) [none].
	RequestTimeout time.Duration
}

func (o Options) clock() lifecycle.Clock {
	if o.Clock != nil {
		return o.Clock
	}
	return lifecycle.WallClock()
}

// Broker is a running broker.
type Broker struct {
	t       testing.TB
	URL     string
	Server  *httptest.Server
	Handler http.Handler
	Store   storage.Store
	Client  *http.Client
	// Sandbox serves the external systems at SandboxURL (nil with NoSandbox).
	Sandbox    *sandbox.Sandbox
	SandboxURL string
}

// Start runs a broker until the test ends.
func Start(t testing.TB, o Options) *Broker {
	t.Helper()
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	if !testing.Verbose() {
		log.SetOutput(io.Discard)
	}
	if o.LogOutput != nil {
		var err error
		log, err = logging.New(logging.Config{Format: "json", Level: "debug"})
		must(t, err)
		log.SetOutput(o.LogOutput)
	}
	ctx := context.Background()

	dbCfg := driver.Config{Driver: driver.SQLite, Path: filepath.Join(t.TempDir(), "keb.db"), SecretKey: strings.Repeat("k", 32), MaxOpenConns: 20}
	if o.DatabaseURL != "" {
		dbCfg = driver.Config{Driver: driver.Postgres, URL: o.DatabaseURL, SecretKey: strings.Repeat("k", 32), MaxOpenConns: 20}
	}
	workers := o.Workers
	if workers == 0 {
		workers = 32
	}
	brokerCfg := broker.Config{OperationTimeout: o.OperationTimeout, DefaultRequestRegion: o.DefaultRequestRegion, UpgradeTimeout: time.Minute}
	if brokerCfg.OperationTimeout == 0 {
		brokerCfg.OperationTimeout = time.Minute
	}
	if brokerCfg.DefaultRequestRegion == "" {
		brokerCfg.DefaultRequestRegion = "cf-eu10"
	}
	cfg := app.Config{
		PollInterval: 25 * time.Millisecond,
		Broker:       brokerCfg,
		Runtime: provisioning.RuntimeDefaults{
			KubernetesVersion: "1.31", KymaVersion: "2.20.0", Components: []string{"istio", "api-gateway"},
			DashboardURL: "https://dashboard.kyma.local",
		},
		Auth:           auth.Config{Username: Username, Password: Password},
		Database:       dbCfg,
		Engine:         engine.Config{Workers: workers, PollInterval: 20 * time.Millisecond, SweepInterval: time.Second, ShutdownTimeout: 5 * time.Second},
		Backends:       infrastructure.Config{SetJSON: simulation(t, o.FailureRate)},
		Orchestration:  orchestration.Config{PollInterval: 20 * time.Millisecond, BusyRetryInterval: 200 * time.Millisecond, LockRetryInterval: 100 * time.Millisecond},
		RequestTimeout: o.RequestTimeout,
	}
	if o.Backends != "" {
		cfg.Backends = infrastructure.Config{SetJSON: o.Backends}
	}
	if o.Orchestration != nil {
		o.Orchestration(&cfg.Orchestration)
	}
	var err error
	cfg.Externals, err = externals.Load()
	must(t, err)
	if o.Backends != "" {
		// The hyperscaler account pool is on the set's gardener backend, as in the broker.
		cfg.Externals.Backends = infrastructure.Config{SetJSON: o.Backends}
	}
	// Retry windows short enough for tests.
	s := &cfg.Externals.Settings
	s.RetryTime, s.CleanupRetryTime, s.CallTimeout, s.ReconcileTimeout = 20*time.Second, 5*time.Second, 10*time.Second, 30*time.Second
	if o.NoSandbox {
		cfg.Externals.DisableAll()
	}

	srv := httptest.NewUnstartedServer(nil)
	var sb *sandbox.Sandbox
	var sbURL string
	a, err := app.Build(ctx, cfg, log, app.Overrides{
		Listener: srv.Listener,
		Clock:    o.clock(),
		Provisioner: func(p *provisioner.Options) {
			p.Clusters = runtimeclient.Clusters{Simulated: runtimeclient.Simulated{InstallDuration: 100 * time.Millisecond, ConnectionDuration: 50 * time.Millisecond}}
			if o.Clusters != nil {
				p.Clusters = *o.Clusters
			}
		},
		Systems: func(_ context.Context, cfg *externals.Config, _ durable.Store) (func(), error) {
			sb, sbURL = startSandbox(t, o, cfg)
			return func() {}, nil
		},
	})
	must(t, err)
	t.Cleanup(a.Close)
	srv.Config.Handler = a.Handler
	srv.Start()
	t.Cleanup(srv.Close)

	if !o.NoEngine {
		runCtx, cancel := context.WithCancel(ctx)
		wait, err := a.Start(runCtx)
		must(t, err)
		t.Cleanup(func() {
			cancel()
			if err := wait(); err != nil {
				t.Errorf("engine: %v", err)
			}
		})
	}
	return &Broker{t: t, URL: srv.URL, Server: srv, Handler: a.Handler, Store: a.Store, Client: srv.Client(), Sandbox: sb, SandboxURL: sbURL}
}

// startSandbox serves the stand-ins on an httptest server (unless NoSandbox) and points the
// clients at them, with retry waits short enough for tests.
func startSandbox(t testing.TB, o Options, cfg *externals.Config) (*sandbox.Sandbox, string) {
	var sb *sandbox.Sandbox
	var sbURL string
	if !o.NoSandbox {
		var err error
		sb, err = standins.New(o.Sandbox)
		must(t, err)
		srv := httptest.NewServer(sb)
		t.Cleanup(srv.Close)
		sbURL = srv.URL
		standins.PointAt(cfg, sbURL, standins.DefaultCredentials())
		cfg.SetRetryBackoff(0, time.Second)
	}
	if o.Externals != nil {
		o.Externals(cfg)
	}
	return sb, sbURL
}

// Remote is a Broker for a broker running elsewhere (another process) at url, with the
// harness's credentials; Store, Handler and Sandbox are nil.
func Remote(t testing.TB, url string) *Broker {
	return &Broker{t: t, URL: url, Client: &http.Client{Timeout: 30 * time.Second}}
}

// simulation is provisionertest.FastSimulation with the failure rate.
func simulation(t testing.TB, failureRate float64) string {
	var set map[string]map[string]any
	must(t, json.Unmarshal([]byte(provisionertest.FastSimulation), &set))
	spec := set["simulated"]["spec"].(map[string]any)
	spec["failureRate"] = failureRate
	raw, err := json.Marshal(set)
	must(t, err)
	return string(raw)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Response is an HTTP answer, read completely.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v and fails the test when it is not JSON.
func (r Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decoding %d response %q: %v", r.Status, r.Body, err)
	}
}

// DecodeJSON decodes the body into v (for goroutines, which must not fail the test themselves).
func (r Response) DecodeJSON(v any) error { return json.Unmarshal(r.Body, v) }

// Description is the OSB error description (empty when there is none).
func (r Response) Description() string {
	var e struct {
		Description string `json:"description"`
		Error       string `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &e)
	if e.Description == "" {
		return e.Error
	}
	return e.Description
}

// Operation is the "operation" field of an OSB answer.
func (r Response) Operation() string {
	var o struct {
		Operation string `json:"operation"`
	}
	_ = json.Unmarshal(r.Body, &o)
	return o.Operation
}

func (r Response) String() string { return fmt.Sprintf("%d %s", r.Status, bytes.TrimSpace(r.Body)) }

// RequestOption changes one request.
type RequestOption func(*http.Request)

// WithoutAPIVersion drops X-Broker-API-Version.
func WithoutAPIVersion() RequestOption {
	return func(r *http.Request) { r.Header.Del("X-Broker-API-Version") }
}

// WithoutAuth drops the credentials.
func WithoutAuth() RequestOption { return func(r *http.Request) { r.Header.Del("Authorization") } }

// WithBasicAuth replaces the credentials.
func WithBasicAuth(user, pass string) RequestOption {
	return func(r *http.Request) { r.SetBasicAuth(user, pass) }
}

// WithHeader sets a header.
func WithHeader(k, v string) RequestOption { return func(r *http.Request) { r.Header.Set(k, v) } }

// NewRequest builds an authenticated OSB request; body is sent as is when it is a string or
// []byte, else marshalled to JSON.
func NewRequest(t testing.TB, method, url string, body any, opts ...RequestOption) *http.Request {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		must(t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, rd)
	must(t, err)
	req.SetBasicAuth(Username, Password)
	req.Header.Set("X-Broker-API-Version", APIVersion)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, o := range opts {
		o(req)
	}
	return req
}

// Do sends a request to path (e.g. /v2/catalog) and reads the answer.
func (b *Broker) Do(method, path string, body any, opts ...RequestOption) Response {
	b.t.Helper()
	resp, err := b.Client.Do(NewRequest(b.t, method, b.URL+path, body, opts...))
	must(b.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	must(b.t, err)
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: raw}
}

func (b *Broker) Get(path string, opts ...RequestOption) Response {
	b.t.Helper()
	return b.Do(http.MethodGet, path, nil, opts...)
}

func (b *Broker) Put(path string, body any, opts ...RequestOption) Response {
	b.t.Helper()
	return b.Do(http.MethodPut, path, body, opts...)
}

func (b *Broker) Patch(path string, body any, opts ...RequestOption) Response {
	b.t.Helper()
	return b.Do(http.MethodPatch, path, body, opts...)
}

func (b *Broker) Delete(path string, opts ...RequestOption) Response {
	b.t.Helper()
	return b.Do(http.MethodDelete, path, nil, opts...)
}

// InstancePath is /v2/service_instances/<id>?accepts_incomplete=true.
func InstancePath(id string) string {
	return "/v2/service_instances/" + id + "?accepts_incomplete=true"
}

// DeprovisionPath is the DELETE path of an instance of plan.
func DeprovisionPath(id, planID string) string {
	return InstancePath(id) + "&service_id=" + ServiceID + "&plan_id=" + planID
}

// LastOperationPath is the last_operation path, with operation when not empty.
func LastOperationPath(id, operation string) string {
	p := "/v2/service_instances/" + id + "/last_operation"
	if operation != "" {
		p += "?operation=" + operation
	}
	return p
}

// SAPContext is a BTP context for a global account and subaccount.
func SAPContext(globalAccount, subAccount string) map[string]any {
	return map[string]any{"platform": "sapcp", "globalaccount_id": globalAccount, "subaccount_id": subAccount, "user_id": "jane@example.com"}
}

// ProvisionBody is a provisioning request body.
func ProvisionBody(planID string, params, ctx map[string]any) map[string]any {
	body := map[string]any{"service_id": ServiceID, "plan_id": planID, "parameters": params}
	if ctx != nil {
		body["context"] = ctx
	}
	return body
}

// AWSParams are valid parameters of the aws plan in cf-eu10.
func AWSParams(name string) map[string]any {
	return map[string]any{"name": name, "region": "eu-central-1"}
}

// Provision sends an accepted provisioning of an aws runtime and returns its operation.
func (b *Broker) Provision(instanceID, name, globalAccount string) string {
	b.t.Helper()
	r := b.Put(InstancePath(instanceID), ProvisionBody(AWSPlanID, AWSParams(name), SAPContext(globalAccount, "sub-"+globalAccount)))
	if r.Status != http.StatusAccepted || r.Operation() == "" {
		b.t.Fatalf("provisioning %s: %s", instanceID, r)
	}
	return r.Operation()
}

// LastOperation is a decoded last_operation answer.
type LastOperation struct {
	State       domain.LastOperationState `json:"state"`
	Description string                    `json:"description"`
}

// WaitForLastOperation polls last_operation (of operation, or the latest when empty) until it
// is no longer in progress, and returns it; it fails the test after timeout.
func (b *Broker) WaitForLastOperation(instanceID, operation string, timeout time.Duration) LastOperation {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	var last Response
	for time.Now().Before(deadline) {
		last = b.Get(LastOperationPath(instanceID, operation))
		if last.Status == http.StatusOK {
			var lo LastOperation
			last.JSON(b.t, &lo)
			if lo.State != domain.InProgress {
				return lo
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.t.Fatalf("operation %q of %s still not finished after %s: %s", operation, instanceID, timeout, last)
	return LastOperation{}
}

// WaitSucceeded waits for the operation and fails the test unless it succeeded.
func (b *Broker) WaitSucceeded(instanceID, operation string) {
	b.t.Helper()
	if lo := b.WaitForLastOperation(instanceID, operation, 20*time.Second); lo.State != domain.Succeeded {
		b.t.Fatalf("operation %s of %s: %s %q", operation, instanceID, lo.State, lo.Description)
	}
}

// Operations lists every operation of an instance, newest first, from the store.
func (b *Broker) Operations(instanceID string) []storage.Operation {
	b.t.Helper()
	page, err := b.Store.Operations().ListOperations(context.Background(), storage.OperationFilter{InstanceIDs: []string{instanceID}, Paging: storage.Paging{PageSize: 1000}})
	must(b.t, err)
	return page.Items
}

// InstanceFilter selects instances by ID, deleted ones included.
func InstanceFilter(ids ...string) storage.InstanceFilter {
	return storage.InstanceFilter{InstanceIDs: ids, IncludeDeleted: true}
}

// FinishOperation sets an operation's final state directly in the store (for tests that run
// without the engine).
func (b *Broker) FinishOperation(id string, state storage.OperationState) {
	b.t.Helper()
	ctx := context.Background()
	op, err := b.Store.Operations().GetOperation(ctx, id)
	must(b.t, err)
	op.State, op.DueAt = state, nil
	if state == storage.StateFailed {
		op.LastError = "failed by the test"
	}
	_, err = b.Store.Operations().UpdateOperation(ctx, op)
	must(b.t, err)
}

// ModifyInstance changes an instance directly in the store.
func (b *Broker) ModifyInstance(id string, change func(*storage.Instance)) storage.Instance {
	b.t.Helper()
	inst, err := storage.ModifyInstance(context.Background(), b.Store.Instances(), id, change)
	must(b.t, err)
	return inst
}

// For returns the broker reporting to t (a subtest or a fuzz target's T).
func (b *Broker) For(t testing.TB) *Broker {
	c := *b
	c.t = t
	return &c
}
