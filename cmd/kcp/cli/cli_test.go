package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/cmd/kcp/cli"
	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/externals"
	ot "github.com/kyma-project/kyma-environment-broker/internal/orchestration/orchestrationtest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/reconcilerstandin"
)

// kcp runs one kcp command line in-process, as the binary does, with the environment env.
type kcp struct {
	t   *testing.T
	env map[string]string
}

func (k kcp) run(args ...string) (stdout, stderr string, code int) {
	var out, errs bytes.Buffer
	code = cli.Run(context.Background(), args, cli.IO{Out: &out, Err: &errs, Width: 200, Getenv: func(key string) string { return k.env[key] }})
	return out.String(), errs.String(), code
}

// ok runs the command, fails the test unless it succeeded, and returns its output.
func (k kcp) ok(args ...string) string {
	k.t.Helper()
	out, errs, code := k.run(args...)
	require.Equal(k.t, 0, code, "kcp %s: %s", strings.Join(args, " "), errs)
	return out
}

func (k kcp) json(into any, args ...string) {
	k.t.Helper()
	require.NoError(k.t, json.Unmarshal([]byte(k.ok(append(args, "-o", "json")...)), into))
}

var progressLine = regexp.MustCompile(`succeeded (\d+)  failed (\d+)  in progress (\d+)  pending (\d+)`)

// 30 runtimes upgraded through kcp with 4 workers: the progress bar never shows more than 4
// running, every upgrade succeeds; then kcp's reads, a retry after failures and a cancel.
func TestKcpEndToEnd(t *testing.T) {
	b := bt.Start(t, bt.Options{Externals: func(c *externals.Config) {
		c.Settings.RetryTime, c.Reconciler.Calls.BreakerCooldown = 2*time.Second, 200*time.Millisecond
	}})
	ids := ot.Fleet(t, b, 30, 3)
	k := kcp{t: t, env: map[string]string{"KCP_URL": b.URL, "KCP_USERNAME": bt.Username, "KCP_PASSWORD": bt.Password}}

	var done dto.StatusResponse
	var errs string
	out, errs, code := k.run("upgrade", "kyma", "--version", "2.21.0", "-t", "all", "--parallel-workers", "4", "--wait", "--poll-interval", "20ms", "-o", "json")
	require.Equal(t, 0, code, errs)
	require.NoError(t, json.Unmarshal([]byte(out), &done))
	assert.Equal(t, dto.Succeeded, done.State)
	assert.Equal(t, 30, done.OperationStats[dto.Succeeded])
	lines := progressLine.FindAllStringSubmatch(errs, -1)
	require.NotEmpty(t, lines, "progress is drawn: %s", errs)
	for _, m := range lines {
		n := make([]int, 4)
		for i := range n {
			n[i], _ = strconv.Atoi(m[i+1])
		}
		assert.LessOrEqual(t, n[2], 4, "at most 4 running: %s", m[0])
		assert.Equal(t, 30, n[0]+n[1]+n[2]+n[3], "counts add up: %s", m[0])
	}
	assert.Contains(t, lines[len(lines)-1][0], "succeeded 30")
	for inst, n := range ot.UpgradesOf(t, b.Store, ids) {
		assert.Equal(t, 1, n, inst)
	}

	table := k.ok("orchestrations")
	assert.Contains(t, table, done.OrchestrationID)
	assert.Contains(t, table, "upgradeKyma")
	var ops dto.OperationResponseList
	k.json(&ops, "orchestrations", done.OrchestrationID, "operations", "--page-size", "50")
	require.Equal(t, 30, ops.TotalCount)
	detail := k.ok("orchestrations", done.OrchestrationID, "operations", ops.Data[0].OperationID)
	assert.Contains(t, detail, "step Apply_Cluster_Configuration")
	assert.Contains(t, k.ok("orchestrations", done.OrchestrationID, "-o", "yaml"), "orchestrationID: "+done.OrchestrationID)
	var page runtime.Page
	k.json(&page, "runtimes", "--account", "ga-0")
	assert.Equal(t, 10, page.TotalCount)
	assert.Contains(t, k.ok("events", "--operation-id", ops.Data[0].OperationID), "Apply_Cluster_Configuration")

	// Failures while the reconciler is down, then a retry through kcp.
	require.NoError(t, b.Sandbox.SetFaults(reconcilerstandin.Name, sandbox.Faults{OutageUntil: time.Now().Add(time.Hour)}))
	out, errs, code = k.run("upgrade", "kyma", "--version", "2.22.0", "-t", "account=ga-1", "--parallel-workers", "5", "--wait", "--poll-interval", "20ms")
	assert.Equal(t, 1, code, "a failed orchestration fails the command")
	assert.Contains(t, errs, "ended failed")
	assert.Regexp(t, `operations failed\s+10\n`, out)
	require.NoError(t, b.Sandbox.SetFaults(reconcilerstandin.Name, sandbox.Faults{}))
	var failed dto.StatusResponseList
	k.json(&failed, "orchestrations", "--state", "failed")
	require.Len(t, failed.Data, 1)
	var retried dto.RetryResponse
	k.json(&retried, "orchestrations", "retry", failed.Data[0].OrchestrationID)
	assert.Len(t, retried.RetriedOperations, 10)
	st := ot.Wait(t, b, failed.Data[0].OrchestrationID, time.Minute, nil, nil)
	assert.Equal(t, dto.Succeeded, st.State, st.Description)

	// A cancel before the scheduled time cancels every operation.
	var created dto.UpgradeResponse
	k.json(&created, "upgrade", "cluster", "--kubernetes-version", "1.32", "-t", "plan=aws,region=eu-central-1", "-e", "account=ga-2",
		"--schedule", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	var canceled dto.CancelResponse
	k.json(&canceled, "orchestrations", "cancel", created.OrchestrationID)
	assert.Equal(t, dto.CancelResponse{OrchestrationID: created.OrchestrationID, State: dto.Canceled, Canceled: 20}, canceled)

	// A dry run lists the runtimes it would upgrade, in the table and in JSON.
	var dry struct {
		OrchestrationID string                  `json:"orchestrationID"`
		DryRun          bool                    `json:"dryRun"`
		Runtimes        []dto.OperationResponse `json:"runtimes"`
	}
	k.json(&dry, "upgrade", "kyma", "--version", "2.23.0", "-t", "instance-id="+ids[0], "--dry-run")
	require.True(t, dry.DryRun)
	require.Len(t, dry.Runtimes, 1)
	assert.Equal(t, ids[0], dry.Runtimes[0].InstanceID)
	assert.NotEmpty(t, dry.Runtimes[0].RuntimeID)
	k.json(&ops, "orchestrations", dry.OrchestrationID, "operations")
	require.Len(t, ops.Data, 1)
	assert.True(t, ops.Data[0].DryRun)
	dryTable := k.ok("upgrade", "kyma", "--version", "2.23.0", "-t", "account=ga-1", "--dry-run")
	assert.Contains(t, dryTable, "(dry run): 10 runtime(s) would be upgraded")
	assert.Contains(t, dryTable, "RUNTIME ID")
	assert.Len(t, strings.Split(strings.TrimSpace(dryTable), "\n"), 12, "a line, the header and one line per runtime")
	assert.Contains(t, k.ok("upgrade", "kyma", "--version", "2.23.0", "-t", "instance-id="+ids[0], "--dry-run"), dry.Runtimes[0].RuntimeID)

	// Clear errors.
	_, errs, code = kcp{t: t, env: map[string]string{"KCP_URL": b.URL, "KCP_USERNAME": bt.Username, "KCP_PASSWORD": "wrong", "HOME": t.TempDir()}}.run("orchestrations")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "unauthorized (401)")
	_, errs, code = k.run("orchestrations", "no-such-id")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "not found (404)")
	_, errs, code = k.run("upgrade", "kyma", "--version", "2", "-t", "color=blue")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, `unknown key "color"`)
	_, errs, code = k.run("upgrade", "kyma", "--version", "2", "-t", "all", "--parallel-workers", "0")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "--parallel-workers")
	_, errs, code = k.run("upgrade", "kyma", "--version", "2", "-t", "all", "--parallel-workers", "1000")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "strategy.parallel.workers: must be from 1 to 100")
	_, errs, code = k.run("runtimes", "-o", "xml")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "--output")
}

// Credentials: flags over KCP_* over the config file; a token is sent as a bearer token; 403
// says what is missing; kubeconfig and expire call their endpoints.
func TestKcpCredentialsAndErrors(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		switch {
		case r.URL.Path == "/kubeconfig/i-1":
			_, _ = w.Write([]byte("apiVersion: v1\nkind: Config\n"))
		case r.URL.Path == "/expire/service_instance/i-1" && r.Method == http.MethodPut:
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"operation":"op-1"}`))
		case r.URL.Path == "/orchestrations" && r.Header.Get("Authorization") == "Bearer no-group":
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"error":"the token has no operator group"}`))
		default:
			_, _ = w.Write([]byte(`{"data":[],"count":0,"totalCount":0}`))
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(file, []byte("url: "+srv.URL+"\ntoken: from-file\n"), 0o600))

	k := kcp{t: t, env: map[string]string{"KCP_CONFIG": file}}
	k.ok("orchestrations")
	assert.Equal(t, "GET /orchestrations Bearer from-file", seen[len(seen)-1])
	k.env["KCP_TOKEN"] = "from-env"
	k.ok("orchestrations")
	assert.Equal(t, "GET /orchestrations Bearer from-env", seen[len(seen)-1])
	k.ok("orchestrations", "--token", "from-flag")
	assert.Equal(t, "GET /orchestrations Bearer from-flag", seen[len(seen)-1])
	delete(k.env, "KCP_TOKEN")
	k.ok("orchestrations", "--config", file, "--token", "", "--username", "ops") // empty token flag: the file's token wins over nothing
	_, errs, code := k.run("orchestrations", "--token", "no-group")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "forbidden (403)")
	assert.Contains(t, errs, "the token has no operator group")

	out := filepath.Join(dir, "rt.yaml")
	k.ok("kubeconfig", "-i", "i-1", "-f", out)
	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, "apiVersion: v1\nkind: Config\n", string(raw))
	info, err := os.Stat(out)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "a kubeconfig is a credential")
	assert.Equal(t, "apiVersion: v1\nkind: Config\n", k.ok("kubeconfig", "-i", "i-1"))
	var expired map[string]any
	k.json(&expired, "expire", "-i", "i-1")
	assert.Equal(t, "op-1", expired["operation"])
	assert.Equal(t, "PUT /expire/service_instance/i-1 Bearer from-file", seen[len(seen)-1])

	_, errs, code = kcp{t: t, env: map[string]string{"KCP_CONFIG": filepath.Join(dir, "missing.yaml")}}.run("runtimes")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "missing.yaml")
	_, errs, code = kcp{t: t, env: map[string]string{"HOME": dir}}.run("runtimes")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "no broker URL")
}

// Tables fit the terminal: the widest columns are cut, marked with "…".
func TestKcpTableFitsWidth(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		long := strings.Repeat("x", 80)
		_ = json.NewEncoder(w).Encode(runtime.Page{Data: []runtime.DTO{{InstanceID: long, RuntimeID: "rt", GlobalAccountID: "ga", ServicePlanName: "aws"}}, Count: 1, TotalCount: 1})
	}))
	defer srv.Close()
	var out bytes.Buffer
	code := cli.Run(context.Background(), []string{"runtimes", "--url", srv.URL}, cli.IO{Out: &out, Err: &out, Width: 60, Getenv: func(string) string { return "" }})
	require.Equal(t, 0, code, out.String())
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		assert.LessOrEqual(t, utf8.RuneCountInString(line), 60, line)
	}
	assert.Contains(t, out.String(), "…")
}

// Versions the broker would refuse (issue 38: "../", NUL, "<script>", newlines, 100,000
// characters) and schedules outside RFC 3339 are refused before anything is sent (exit 2).
func TestKcpUpgradeChecksVersionsBeforeSending(t *testing.T) {
	sent := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		sent++
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"orchestrationID":"o-1"}`))
	}))
	defer srv.Close()
	k := kcp{t: t, env: map[string]string{"KCP_URL": srv.URL, "KCP_TOKEN": "t"}}
	for _, bad := range []string{"../2.0", "2.0\x00", "<script>", "2.0\nX", strings.Repeat("1", 100_000)} {
		for _, args := range [][]string{
			{"upgrade", "kyma", "-t", "all", "--version", bad},
			{"upgrade", "cluster", "-t", "all", "--kubernetes-version", bad},
			{"upgrade", "cluster", "-t", "all", "--machine-image-version", bad},
		} {
			_, errs, code := k.run(args...)
			assert.Equal(t, 2, code, "%q", args)
			assert.Contains(t, errs, args[len(args)-2], "the flag is named")
		}
	}
	_, errs, code := k.run("upgrade", "kyma", "-t", "all", "--version", "2.21.0", "--schedule", "2030-01-01T00:00:00+24:00")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "--schedule")
	assert.Zero(t, sent, "nothing was sent")
	k.ok("upgrade", "kyma", "-t", "all", "--version", "2.21.0+build.1", "--schedule", "2030-01-01T00:00:00+01:00")
	assert.Equal(t, 1, sent)
}
