package cli_test

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/externals"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/edpstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv"
)

// kcpBin is the built kcp, run against one broker.
type kcpBin struct {
	t   *testing.T
	bin string
	env []string
}

func buildKcp(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir+"/", "./cmd/kcp")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return filepath.Join(dir, "kcp")
}

func (k kcpBin) start(args ...string) *proc { return startKcp(k.t, k.bin, k.env, args...) }

func (k kcpBin) run(args ...string) (stdout, stderr string, code int) {
	k.t.Helper()
	p := k.start(args...)
	code = p.exit(k.t, time.Minute)
	return p.out.String(), p.err.String(), code
}

// jsonLines decodes kcp events --follow -o json's output: one event per line.
func jsonLines(t *testing.T, out string) []runtime.Event {
	t.Helper()
	var evs []runtime.Event
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e runtime.Event
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e), "line %q", sc.Text())
		evs = append(evs, e)
	}
	return evs
}

// The operator's view of an outage through the built kcp and a broker with the sandbox: kcp
// runtimes shows the step a provisioning is retrying and then why it failed; kcp events --type
// is checked by the broker and names the flag; --follow prints each new event once, as it comes,
// and ends cleanly on SIGINT and at --timeout.
func TestKcpEventsAndRuntimesThroughTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kcp")
	}
	bin := buildKcp(t)
	b := bt.Start(t, bt.Options{Externals: func(c *externals.Config) { c.Settings.RetryTime = 6 * time.Second }})
	k := kcpBin{t: t, bin: bin, env: []string{"KCP_URL=" + b.URL, "KCP_USERNAME=" + bt.Username, "KCP_PASSWORD=" + bt.Password,
		"HOME=" + t.TempDir(), "KCP_TOKEN=", "KCP_CONFIG=", "COLUMNS=400"}}

	ok := uuid.NewString()
	b.WaitSucceeded(ok, b.Provision(ok, "rt-ok", "ga-ok"))

	// Following the fleet's succeeded and failed events, as JSON lines.
	follow := k.start("events", "--follow", "--type", "succeeded,failed", "--poll-interval", "100ms", "--page-size", "5", "-o", "json")
	require.Eventually(t, func() bool { return len(jsonLines(t, follow.out.String())) == 5 }, 30*time.Second, 20*time.Millisecond,
		"the newest page first: %s %s", follow.out.String(), follow.err.String())

	// An EDP outage: the next provisioning retries EDP_Registration, then fails.
	require.NoError(t, b.Sandbox.SetFaults(edpstandin.Name, sandbox.Faults{OutageUntil: time.Now().Add(time.Hour)}))
	bad := uuid.NewString()
	badOp := b.Provision(bad, "rt-bad", "ga-bad")
	require.Eventually(t, func() bool {
		out, _, code := k.run("runtimes", "--instance-id", bad)
		return code == 0 && strings.Contains(out, "EDP_Registration")
	}, 30*time.Second, 50*time.Millisecond, "kcp runtimes shows the step being retried")
	out, _, code := k.run("runtimes", "--instance-id", bad)
	require.Equal(t, 0, code)
	header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
	assert.Equal(t, []string{"GLOBAL", "ACCOUNT", "SUBACCOUNT", "INSTANCE", "ID", "RUNTIME", "ID", "PLAN", "REGION", "STATE", "CREATED", "STEP", "REASON"}, header)
	assert.Regexp(t, `provisioning\s+\S+\s+create_runtime/EDP_Registration`, out)

	// Its retries say when the next try is and when the step gives up.
	var retries []runtime.Event
	require.Eventually(t, func() bool {
		retries = nil
		all, _, _ := k.run("events", "--instance-id", bad, "--type", "retrying", "-o", "json")
		_ = json.Unmarshal([]byte(all), &retries)
		return len(retries) > 0
	}, 30*time.Second, 50*time.Millisecond)
	assert.Regexp(t, `^next try at \S+Z \(in [^)]+\), gives up at \S+Z: |^no further try: gives up at `, retries[0].Message)
	assert.Equal(t, "EDP_Registration", retries[0].Step)

	b.WaitForLastOperation(bad, badOp, time.Minute)
	out, _, code = k.run("runtimes", "--instance-id", bad)
	require.Equal(t, 0, code)
	assert.Regexp(t, `failed\s+\S+\s+.*EDP_Registration`, out, "the reason names the step that failed")
	assert.Contains(t, out, "EDP", "and the system")
	out, _, code = k.run("runtimes", "--instance-id", ok)
	require.Equal(t, 0, code)
	assert.NotContains(t, out, "EDP_Registration", "a provisioned runtime has no step or reason")
	assert.NotContains(t, out, "REASON", "columns no runtime listed fills are left out")

	// The follower printed the new events: the failure, each event once, only those types.
	require.Eventually(t, func() bool {
		for _, e := range jsonLines(t, follow.out.String()) {
			if e.InstanceID == bad && e.Type == "failed" {
				return true
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "the failure is followed: %s", follow.err.String())
	require.NoError(t, follow.cmd.Process.Signal(syscall.SIGINT))
	assert.Equal(t, 0, follow.exit(t, 10*time.Second), "SIGINT ends --follow cleanly: %s", follow.err.String())
	assert.Empty(t, follow.err.String())
	seen := map[int64]bool{}
	for _, e := range jsonLines(t, follow.out.String()) {
		assert.False(t, seen[e.ID], "event %d printed twice", e.ID)
		seen[e.ID] = true
		assert.Contains(t, []string{"succeeded", "failed"}, e.Type)
	}

	// --type is checked by the broker, the error names the flag (a usage error).
	_, errs, code := k.run("events", "--type", "begun")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, `--type: unknown event type "begun" (started, retrying, succeeded, failed, skipped)`)
	_, errs, code = k.run("events", "--follow", "--type", "retrying,begun")
	assert.Equal(t, 2, code, "following checks too, before it starts")
	assert.Contains(t, errs, "--type: ")

	// A follow in a table, bounded by --timeout: the header, the instance's events, exit 0.
	started := time.Now()
	out, errs, code = k.run("events", "--follow", "-i", bad, "--timeout", "1s", "--poll-interval", "100ms")
	assert.Equal(t, 0, code, errs)
	assert.Less(t, time.Since(started), 20*time.Second)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	assert.Equal(t, []string{"TIME", "INSTANCE", "ID", "OPERATION", "ID", "STEP", "TYPE", "DURATION", "MESSAGE"}, strings.Fields(lines[0]))
	assert.Greater(t, len(lines), 2)
	for _, l := range lines[1:] {
		assert.Contains(t, l, bad)
	}
	assert.Contains(t, out, "EDP_Registration")
}
