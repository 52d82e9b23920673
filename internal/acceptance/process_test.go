package acceptance

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/provisionertest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
)

// secretKey encrypts secrets at rest on PostgreSQL (SQLite generates its own key file).
var secretKey = strings.Repeat("k", 32)

// brokerProcess is cmd/broker in a child process with the embedded sandbox, configured by APP_*
// variables only, as a user runs it; it can be killed (SIGKILL) and started again on the same
// database and ports.
type brokerProcess struct {
	t *testing.T
	// url is the broker's; sandboxURL the embedded sandbox's (its admin API at /_sandbox/).
	url, sandboxURL string
	env             []string
	dir             string
	db              driver.Config
	cmd             *exec.Cmd
	// exited is closed when the current process has exited.
	exited chan struct{}
	logs   *os.File
	// faults are set again after every start: the sandbox keeps them in memory only.
	faults map[string]sandbox.Faults
}

// onDefaults is the broker on its defaults: SQLite (keb.db in its working directory).
func onDefaults(t *testing.T, env ...string) *brokerProcess {
	dir := t.TempDir()
	return newBrokerProcess(t, dir, driver.Config{Driver: driver.SQLite, Path: filepath.Join(dir, "keb.db")}, env...)
}

// onPostgres is the broker on the PostgreSQL database at url.
func onPostgres(t *testing.T, url string, env ...string) *brokerProcess {
	env = append([]string{"APP_DATABASE_DRIVER=postgres", "APP_DATABASE_URL=" + url, "APP_DATABASE_SECRET_KEY=" + secretKey}, env...)
	return newBrokerProcess(t, t.TempDir(), driver.Config{Driver: driver.Postgres, URL: url, SecretKey: secretKey}, env...)
}

// newBrokerProcess prepares the broker; env entries override the settings below, which only
// make the simulated world fast (no lease, limit or retry of the engine is shortened).
func newBrokerProcess(t *testing.T, dir string, db driver.Config, env ...string) *brokerProcess {
	port, sandboxPort := freePort(t), freePort(t)
	logs, err := os.Create(filepath.Join(dir, "broker.log"))
	require.NoError(t, err)
	t.Cleanup(func() {
		logs.Close()
		keepLog(t, logs.Name())
		if t.Failed() {
			logTail(t, logs.Name(), 40)
		}
	})
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir()}
	if v := os.Getenv("GOMAXPROCS"); v != "" {
		// A suite run with GOMAXPROCS=1 (a busy machine) runs the brokers so too.
		base = append(base, "GOMAXPROCS="+v)
	}
	c := &brokerProcess{
		t: t, dir: dir, db: db, logs: logs, faults: map[string]sandbox.Faults{},
		url:        fmt.Sprintf("http://127.0.0.1:%d", port),
		sandboxURL: fmt.Sprintf("http://127.0.0.1:%d", sandboxPort),
		env: append(base,
			"APP_PORT="+strconv.Itoa(port), "APP_SANDBOX_ADDRESS=127.0.0.1:"+strconv.Itoa(sandboxPort), "APP_SANDBOX_TLS_ADDRESS=127.0.0.1:0",
			"APP_BROKER_USERNAME="+bt.Username, "APP_BROKER_PASSWORD="+bt.Password,
			"APP_PROVISIONER_SET_JSON="+provisionertest.FastSimulation, "APP_BROKER_POLL_INTERVAL=200ms",
		),
	}
	// exec uses the last of duplicate variables.
	c.env = append(c.env, env...)
	return c
}

// keepLog copies the broker's whole log into the directory KEB_ACCEPTANCE_LOGS names, if any,
// pass or fail: the test's own directory goes with it.
func keepLog(t *testing.T, path string) {
	dir := os.Getenv("KEB_ACCEPTANCE_LOGS")
	if dir == "" {
		return
	}
	raw, err := os.ReadFile(path)
	if err == nil {
		name := fmt.Sprintf("%s-%d.log", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano())
		err = os.WriteFile(filepath.Join(dir, name), raw, 0o644)
	}
	if err != nil {
		t.Logf("keeping the broker's log in KEB_ACCEPTANCE_LOGS: %v", err)
	}
}

// logTail logs the end of the broker's log, which goes with the test's directory.
func logTail(t *testing.T, path string, lines int) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Logf("reading the broker's log: %v", err)
		return
	}
	all := strings.Split(strings.TrimSpace(string(raw)), "\n")
	t.Logf("the broker's log, last %d lines:\n%s", lines, strings.Join(all[max(0, len(all)-lines):], "\n"))
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// start runs the broker, waits until /healthz answers, sets the faults and returns when it answered.
func (c *brokerProcess) start() time.Time {
	c.t.Helper()
	c.cmd = exec.Command(brokerBinary)
	c.cmd.Dir, c.cmd.Env, c.cmd.Stdout, c.cmd.Stderr = c.dir, c.env, c.logs, c.logs
	require.NoError(c.t, c.cmd.Start())
	c.t.Cleanup(c.kill)
	exited := make(chan struct{})
	go func(cmd *exec.Cmd) { _ = cmd.Wait(); close(exited) }(c.cmd)
	c.exited = exited
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(c.url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				up := time.Now()
				for sys, f := range c.faults {
					putFaults(c.t, c.sandboxURL, sys, f)
				}
				return up
			}
		}
		select {
		case <-exited:
			c.t.Fatalf("the broker exited at start; see %s", c.logs.Name())
		case <-time.After(50 * time.Millisecond):
		}
	}
	c.t.Fatalf("the broker did not start; see %s", c.logs.Name())
	return time.Time{}
}

// kill ends the broker with SIGKILL: no shutdown, leases left behind.
func (c *brokerProcess) kill() {
	if c.cmd == nil {
		return
	}
	select {
	case <-c.exited:
	default:
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// alive reports whether the process started last is still running (not restarted meanwhile).
func (c *brokerProcess) alive(pid int) bool {
	select {
	case <-c.exited:
		return false
	default:
		return c.cmd.Process.Pid == pid
	}
}

// setFaults sets a system's faults now and after every restart.
func (c *brokerProcess) setFaults(system string, f sandbox.Faults) {
	c.t.Helper()
	c.faults[system] = f
	putFaults(c.t, c.sandboxURL, system, f)
}

// client is the broker's OSB and operator API.
func (c *brokerProcess) client() *bt.Broker { return bt.Remote(c.t, c.url) }

// openStore opens the broker's database, for what the HTTP API does not show (leases, progress).
func (c *brokerProcess) openStore() storage.Store {
	c.t.Helper()
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	store, err := driver.Open(context.Background(), c.db, log)
	require.NoError(c.t, err)
	return store
}

// killLatency slows every sandbox system while a kill is prepared, so operations are held in
// a step that calls out when the broker dies rather than all finished or all waiting.
const killLatency = 300 * time.Millisecond

// killWhenInFlight kills the broker with work in flight (holdInFlight); the slowdown ends with
// the kill: the next start sets the faults the test had set before.
func (c *brokerProcess) killWhenInFlight(more int) {
	c.t.Helper()
	saved, held := c.holdInFlight(more)
	c.kill()
	// Zero faults too, for systems the test left alone: the next start clears the slowdown.
	for sys, f := range saved {
		c.faults[sys] = f
	}
	c.t.Logf("killed the broker (SIGKILL) after %d more requests to the sandbox, with %d operations held", more, held)
}

// holdInFlight slows every sandbox system by killLatency, waits for more requests since the
// call (so faults land at different points of the operations), then until the store shows an
// unfinished operation leased by the broker (a worker runs it): work is observed in flight,
// not assumed from a count. It returns the faults to restore and how many operations were held.
func (c *brokerProcess) holdInFlight(more int) (map[string]sandbox.Faults, int) {
	c.t.Helper()
	saved := map[string]sandbox.Faults{}
	for _, sys := range allSystems {
		f := c.faults[sys]
		saved[sys] = f
		f.Latency = max(f.Latency, killLatency)
		putFaults(c.t, c.sandboxURL, sys, f)
	}
	c.waitBusy(more)
	held := 0
	for deadline := time.Now().Add(2 * time.Minute); held == 0; time.Sleep(20 * time.Millisecond) {
		require.True(c.t, time.Now().Before(deadline), "no operation was held by the broker for 2 minutes: nothing in flight")
		for _, op := range c.unfinishedOperations() {
			if op.LeaseOwner != "" {
				held++
			}
		}
	}
	return saved, held
}

// restoreFaults sets the faults holdInFlight saved again.
func (c *brokerProcess) restoreFaults(saved map[string]sandbox.Faults) {
	c.t.Helper()
	for sys, f := range saved {
		c.faults[sys] = f
		putFaults(c.t, c.sandboxURL, sys, f)
	}
}

// waitBusy waits until the sandbox has seen more requests since the call.
func (c *brokerProcess) waitBusy(more int) {
	c.t.Helper()
	start := sandboxRequests(c.t, c.sandboxURL)
	deadline := time.Now().Add(2 * time.Minute)
	for sandboxRequests(c.t, c.sandboxURL) < start+more && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

// sharedSandbox serves the sandbox in the test process until the test ends, for replicas that
// share it through APP_SANDBOX_URL: each embedding its own on one database would be two
// Directors (and a second embedded sandbox does not start while the first serves).
func sharedSandbox(t *testing.T, seed uint64) *standins.Listeners {
	t.Helper()
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	sb, err := standins.Listen(context.Background(), standins.Options{Log: log, Seed: seed}, "127.0.0.1:0", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = sb.Shutdown(ctx)
	})
	return sb
}
