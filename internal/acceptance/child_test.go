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
	"testing"
	"time"

	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/provisionertest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
)

// childBroker is the broker in a child process, on a SQLite file that outlives it.
type childBroker struct {
	t    *testing.T
	env  []string
	url  string
	cmd  *exec.Cmd
	logs *os.File
	// dbPath is its SQLite database (the key next to it).
	dbPath string
}

// newChildBroker prepares the broker process; env entries override the defaults below.
func newChildBroker(t *testing.T, sandboxURL string, env ...string) *childBroker {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	dir := t.TempDir()
	logs, err := os.Create(filepath.Join(dir, "broker.log"))
	require.NoError(t, err)
	t.Cleanup(func() { logs.Close() })
	c := &childBroker{t: t, url: fmt.Sprintf("http://127.0.0.1:%d", port), logs: logs, env: append(os.Environ(),
		childEnv+"=1", childSandbox+"="+sandboxURL,
		"APP_HOST=127.0.0.1", "APP_PORT="+strconv.Itoa(port),
		"APP_DATABASE_DRIVER=sqlite", "APP_DATABASE_PATH="+filepath.Join(dir, "keb.db"),
		"APP_BROKER_USERNAME="+bt.Username, "APP_BROKER_PASSWORD="+bt.Password,
		"APP_PROVISIONER_SET_JSON="+provisionertest.FastSimulation, "APP_BROKER_POLL_INTERVAL=200ms",
		// A killed broker's leases must expire quickly for the restarted one to take over.
		"APP_ENGINE_LEASE_DURATION=3s", "APP_ENGINE_WORKERS=128",
		"APP_EXTERNAL_CALL_TIMEOUT=1m", "APP_EXTERNAL_RETRY_TIME=10m", "APP_EXTERNAL_CLEANUP_RETRY_TIME=10m",
		"APP_AVS_RETRY_MAX_BACKOFF=1s", "APP_EDP_RETRY_MAX_BACKOFF=1s", "APP_IAS_RETRY_MAX_BACKOFF=1s", "APP_SERVICE_MANAGER_RETRY_MAX_BACKOFF=1s",
		"APP_RECONCILER_RETRY_MAX_BACKOFF=1s", "APP_DIRECTOR_RETRY_MAX_BACKOFF=1s", "APP_AZURE_RETRY_MAX_BACKOFF=1s",
	), dbPath: filepath.Join(dir, "keb.db")}
	// exec uses the last of duplicate variables.
	c.env = append(c.env, env...)
	return c
}

// openStore opens the broker's database, for what the HTTP API does not show.
func (c *childBroker) openStore() storage.Store {
	c.t.Helper()
	store, err := driver.Open(context.Background(), driver.Config{Driver: driver.SQLite, Path: c.dbPath}, logrus.New())
	require.NoError(c.t, err)
	c.t.Cleanup(func() { store.Close() })
	return store
}

// start runs the broker and waits until it answers.
func (c *childBroker) start() {
	c.t.Helper()
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env, c.cmd.Stdout, c.cmd.Stderr = c.env, c.logs, c.logs
	require.NoError(c.t, c.cmd.Start())
	c.t.Cleanup(func() { c.kill() })
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(c.url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("the broker did not start; see %s", c.logs.Name())
}

// kill ends the broker with SIGKILL: no shutdown, leases left behind.
func (c *childBroker) kill() {
	if c.cmd != nil && c.cmd.Process != nil && c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Kill()
		_, _ = c.cmd.Process.Wait()
	}
}

// killWhenBusy kills the broker once the sandbox has seen more requests since the call.
func killWhenBusy(t *testing.T, c *childBroker, sb *sandbox.Sandbox, more int) {
	t.Helper()
	total := func() int {
		n := 0
		for _, sys := range allSystems {
			st, err := sb.Stats(sys)
			require.NoError(t, err)
			n += st.Requests
		}
		return n
	}
	start := total()
	deadline := time.Now().Add(2 * time.Minute)
	for total() < start+more && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	c.kill()
	t.Logf("killed the broker after %d more requests to the sandbox", total()-start)
}
