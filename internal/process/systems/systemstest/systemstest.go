// Package systemstest gives step tests the real clients of every external system, pointed at an
// in-process sandbox on a loopback HTTP server, so a step's tests exercise the real request
// shapes, retries and idempotency; faults injected into the sandbox drive the retry and failure
// paths.
package systemstest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/externals"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
)

// Env is a running sandbox and the systems built against it.
type Env struct {
	Systems systems.Systems
	Sandbox *sandbox.Sandbox
	URL     string
	// Built carries the overrides defaults and limits too.
	Built externals.Built
}

// Start serves the stand-ins until the test ends. Client retries back off at most 50ms, a call
// makes the default 3 attempts, a breaker opened by 10 failures in a row lets a probe through after
// a millisecond (so that a system the test brings back answers the next call), and the step retry
// windows are a minute (provisioning) and 5 minutes (cleanup) of the test's clock.
func Start(t testing.TB, o standins.Options) *Env {
	t.Helper()
	return StartWith(t, o, clientkit.Calls{Attempts: 3, Timeout: 5 * time.Second, BreakerThreshold: 10, BreakerCooldown: time.Millisecond})
}

// StartWith is Start with the clients' call policy calls (attempts, budget, breaker).
func StartWith(t testing.TB, o standins.Options, calls clientkit.Calls) *Env {
	t.Helper()
	sb, err := standins.New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sb)
	t.Cleanup(srv.Close)
	cfg, err := externals.Load()
	if err != nil {
		t.Fatal(err)
	}
	standins.PointAt(&cfg, srv.URL, standins.DefaultCredentials())
	cfg.SetRetryBackoff(5*time.Millisecond, 50*time.Millisecond)
	cfg.SetCalls(calls)
	cfg.Settings.RetryTime, cfg.Settings.CleanupRetryTime = time.Minute, 5*time.Minute
	built, err := cfg.Build()
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Systems: built.Systems, Sandbox: sb, URL: srv.URL, Built: built}
}

// Faults sets a system's faults (sandbox names: avs, edp, ias, servicemanager, azure, reconciler,
// director).
func (e *Env) Faults(t testing.TB, system string, f sandbox.Faults) {
	t.Helper()
	if err := e.Sandbox.SetFaults(system, f); err != nil {
		t.Fatal(err)
	}
}

// Down makes a system answer 503 to everything until the test sets other faults.
func (e *Env) Down(t testing.TB, system string) { e.Faults(t, system, sandbox.Faults{ErrorRate: 1}) }

// Objects reads what exists in a system (GET /_sandbox/<system>/objects) into T, the stand-in
// package's Objects type.
func Objects[T any](t testing.TB, e *Env, system string) T {
	t.Helper()
	resp, err := http.Get(e.URL + "/_sandbox/" + system + "/objects")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("reading %s objects: HTTP %d", system, resp.StatusCode)
	}
	var out T
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("decoding %s objects: %v", system, err)
	}
	return out
}

// Clock is a time a test moves, shared by the engine and the stand-ins (standins.Options.Now).
type Clock = sandboxtest.Clock

// NewClock starts a clock at t.
func NewClock(t time.Time) *Clock { return sandboxtest.NewClock(t) }
