// Package cmdtest runs the built commands as an operator does: their versions, help without a
// cluster, the log line that says where the generated password is, and a failed start that
// leaves nothing behind.
package cmdtest

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var commands = []string{"broker", "provisioner", "kcp", "kyma", "runtime-agent", "sandbox", "module-manager"}

// build builds every command into one directory.
func build(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the commands")
	}
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	entries, err := os.ReadDir(filepath.Join(root, "cmd"))
	require.NoError(t, err)
	var all []string
	for _, e := range entries {
		if e.IsDir() {
			all = append(all, e.Name())
		}
	}
	assert.ElementsMatch(t, commands, all, "every command is covered here")
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/...")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return dir
}

func run(t *testing.T, dir, work string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, name), args...)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestCommands(t *testing.T) {
	dir := build(t)

	// Every command answers `version` and `--version` with its build, and needs nothing else.
	t.Run("version", func(t *testing.T) {
		for _, c := range commands {
			for _, arg := range []string{"version", "--version"} {
				out, err := run(t, dir, t.TempDir(), []string{"KUBECONFIG=/nonexistent"}, c, arg)
				require.NoError(t, err, "%s %s: %s", c, arg, out)
				assert.Regexp(t, `^`+c+` version \S+, commit \S+`, out, "%s %s", c, arg)
			}
		}
	})

	// runtime-agent --help printed an in-cluster configuration error.
	t.Run("runtime-agent help", func(t *testing.T) {
		out, err := run(t, dir, t.TempDir(), []string{"KUBERNETES_SERVICE_HOST=", "APP_KUBECONFIG="}, "runtime-agent", "--help")
		require.NoError(t, err, out)
		assert.Contains(t, out, "runtime-agent revoke")
		// client-go's "unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and
		// KUBERNETES_SERVICE_PORT must be defined" was the answer.
		assert.NotContains(t, out, "unable to load")
		assert.NotContains(t, strings.ToLower(out), "error")
	})

	// A start that fails on a taken port left a fresh keb.db and its key behind.
	t.Run("failed start leaves no files", func(t *testing.T) {
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer taken.Close()
		work := t.TempDir()
		out, err := run(t, dir, work, []string{
			"APP_PORT=" + freePort(t), "APP_SANDBOX_ADDRESS=" + taken.Addr().String(), "APP_SANDBOX_TLS_ADDRESS=127.0.0.1:0",
		}, "broker")
		require.Error(t, err, "the sandbox's port is taken: %s", out)
		assert.Contains(t, out, "APP_SANDBOX_ADDRESS")
		left, err := os.ReadDir(work)
		require.NoError(t, err)
		assert.Empty(t, left, "nothing created by the failed start is left")
	})

	// In a container without a terminal the log is all an operator has: it says where the
	// generated password is kept and how to read it, without the password itself.
	t.Run("password log line", func(t *testing.T) {
		work := t.TempDir()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(dir, "broker"))
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "APP_PORT="+freePort(t), "APP_SANDBOX_ADDRESS=127.0.0.1:0", "APP_SANDBOX_TLS_ADDRESS=127.0.0.1:0",
			"APP_BROKER_USERNAME=", "APP_BROKER_PASSWORD=", "APP_LOG_FORMAT=json")
		stderr, err := cmd.StderrPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		file := filepath.Join(work, "keb.credentials")
		lines := make(chan string)
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		deadline := time.After(time.Minute)
		for {
			select {
			case l, ok := <-lines:
				require.True(t, ok, "the broker stopped before saying where the password is")
				if !strings.Contains(l, "keb.credentials") {
					continue
				}
				password, err := os.ReadFile(file)
				require.NoError(t, err)
				assert.Contains(t, l, file, "the absolute path")
				assert.Contains(t, l, "docker cp CONTAINER:"+file+" - | tar -xO")
				assert.Contains(t, l, "APP_BROKER_PASSWORD")
				assert.NotContains(t, l, strings.TrimSpace(string(password)), "the password stays out of the log")
				return
			case <-deadline:
				t.Fatal("no log line says where the password is kept")
			}
		}
	})
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

var shBlock = regexp.MustCompile("(?s)```sh\n(.*?)```")

// docs/user/kcp.md exported a port, user and password that are not the broker's defaults and
// ran a kcp that was not on the PATH: its sh blocks now run as written, in order, in a
// directory of the checkout where a broker with its defaults runs (only the port is moved).
func TestKCPDocRunsAsWritten(t *testing.T) {
	dir := build(t)
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "user", "kcp.md"))
	require.NoError(t, err)
	blocks := shBlock.FindAllStringSubmatch(string(doc), -1)
	require.NotEmpty(t, blocks)
	script := "set -euo pipefail\n"
	for _, b := range blocks {
		script += b[1]
	}

	// The checkout, without its generated files: the broker writes its own here.
	work := t.TempDir()
	for _, name := range []string{"go.mod", "go.sum", "cmd", "internal", "common"} {
		require.NoError(t, os.Symlink(filepath.Join(root, name), filepath.Join(work, name)))
	}
	port := freePort(t)
	env := append(os.Environ(), "APP_PORT="+port, "APP_SANDBOX_ADDRESS=127.0.0.1:0", "APP_SANDBOX_TLS_ADDRESS=127.0.0.1:0",
		"APP_BROKER_USERNAME=", "APP_BROKER_PASSWORD=")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	broker := exec.CommandContext(ctx, filepath.Join(dir, "broker"))
	broker.Dir, broker.Env = work, env
	require.NoError(t, broker.Start())
	defer func() { _ = broker.Process.Kill(); _ = broker.Wait() }()
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://127.0.0.1:" + port + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		_, statErr := os.Stat(filepath.Join(work, "keb.credentials"))
		return resp.StatusCode == http.StatusOK && statErr == nil
	}, time.Minute, 100*time.Millisecond)

	sctx, scancel := context.WithTimeout(ctx, 5*time.Minute)
	defer scancel()
	sh := exec.CommandContext(sctx, "bash", "-c", script)
	sh.Dir, sh.Env = work, env
	out, err := sh.CombinedOutput()
	require.NoError(t, err, "kcp.md's commands failed:\n%s", out)
	assert.Contains(t, string(out), "kcp version")
}
