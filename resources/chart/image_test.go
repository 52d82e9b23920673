package chart_test

import (
	"context"
	"debug/elf"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nonrootUID is the user of gcr.io/distroless/static-debian12:nonroot, the image's base.
const nonrootUID = 65532

// dockerfileBuild returns the Dockerfile's build loop: the commands and the shell command that
// builds one of them into /out/$cmd.
func dockerfileBuild(t *testing.T, dockerfile string) ([]string, string) {
	t.Helper()
	m := regexp.MustCompile(`for cmd in ([a-z\- ]+); do \\\n\s*(.+?) \|\| exit 1;`).FindStringSubmatch(dockerfile)
	require.NotNil(t, m, "the Dockerfile's build loop")
	return strings.Fields(m[1]), m[2]
}

// dockerfileEnv returns the variables of the Dockerfile's ENV instruction.
func dockerfileEnv(t *testing.T, dockerfile string) map[string]string {
	t.Helper()
	m := regexp.MustCompile(`(?s)\nENV (.*?[^\\])\n`).FindStringSubmatch(dockerfile)
	require.NotNil(t, m, "the Dockerfile's ENV")
	out := map[string]string{}
	for _, kv := range strings.Fields(strings.ReplaceAll(m[1], "\\\n", " ")) {
		k, v, ok := strings.Cut(kv, "=")
		require.True(t, ok, kv)
		out[k] = v
	}
	return out
}

// docsRunEnv returns the -e variables of the first `docker run` of docs/user/docker.md.
func docsRunEnv(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "user", "docker.md"))
	require.NoError(t, err)
	run := regexp.MustCompile(`(?s)\ndocker run (.*?[^\\])\n`).FindStringSubmatch(string(data))
	require.NotNil(t, run, "docker.md's docker run")
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`-e (APP_[A-Z_]+)=('[^']*'|\S+)`).FindAllStringSubmatch(run[1], -1) {
		out[m[1]] = strings.Trim(m[2], "'")
	}
	require.NotEmpty(t, out)
	return out
}

// The image as far as this machine can build it without a container engine: every binary built by
// the Dockerfile's own build command is static (the distroless static base has no libc), answers
// --version, and the entrypoint runs as the base's nonroot user in a /data it owns, with the
// image's environment plus docs/user/docker.md's `docker run -e` variables (only the listen ports
// differ, as `-p` would map them), serves the README's provisioning through the sandbox, keeps its
// database in the working directory and needs the admin password for the sandbox.
func TestImageRunsAsBuilt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every command of the image")
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	require.NoError(t, err)
	dockerfile := string(data)
	commands, build := dockerfileBuild(t, dockerfile)
	require.Contains(t, build, "/out/$cmd")

	// Directories the nonroot user can traverse, like the image's root.
	root, err := os.MkdirTemp("", "keb-image-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	require.NoError(t, os.Chmod(root, 0o755))
	out := filepath.Join(root, "out")
	require.NoError(t, os.Mkdir(out, 0o755))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	for _, c := range commands {
		sh := exec.CommandContext(ctx, "sh", "-c", strings.ReplaceAll(build, "/out/", out+"/"))
		sh.Dir = filepath.Join("..", "..")
		sh.Env = append(os.Environ(), "cmd="+c)
		b, err := sh.CombinedOutput()
		require.NoError(t, err, "the Dockerfile's build of %s: %s", c, b)
		bin := filepath.Join(out, c)
		f, err := elf.Open(bin)
		require.NoError(t, err)
		for _, p := range f.Progs {
			assert.NotEqual(t, elf.PT_INTERP, p.Type, "%s is static: no program interpreter", c)
		}
		libs, _ := f.ImportedLibraries()
		assert.Empty(t, libs, "%s links no shared library", c)
		f.Close()
		v, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
		require.NoError(t, err, "%s --version: %s", c, v)
		assert.NotEmpty(t, strings.TrimSpace(string(v)))
	}

	// WORKDIR /data, owned by nonroot; ENV, then the docs' -e, then the mapped ports.
	work := filepath.Join(root, "data")
	require.NoError(t, os.Mkdir(work, 0o755))
	env := dockerfileEnv(t, dockerfile)
	for k, v := range docsRunEnv(t) {
		env[k] = v
	}
	assert.Equal(t, "true", env["APP_SANDBOX_ENABLED"], "the docs turn the sandbox on")
	ports := freePorts(t, 4)
	env["APP_PORT"] = fmt.Sprint(ports[0])
	env["APP_STATUS_ADDRESS"] = fmt.Sprintf("0.0.0.0:%d", ports[1])
	env["APP_SANDBOX_ADDRESS"] = fmt.Sprintf("0.0.0.0:%d", ports[2])
	env["APP_SANDBOX_TLS_ADDRESS"] = fmt.Sprintf("0.0.0.0:%d", ports[3])
	cmd := exec.CommandContext(ctx, filepath.Join(out, "broker"))
	cmd.Dir = work
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/home/nonroot"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if os.Geteuid() == 0 {
		require.NoError(t, os.Chown(work, nonrootUID, nonrootUID))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nonrootUID, Gid: nonrootUID}}
	} else {
		t.Logf("not root: the broker runs as uid %d, not the image's %d", os.Geteuid(), nonrootUID)
	}
	user, password := env["APP_BROKER_USERNAME"], env["APP_BROKER_PASSWORD"]
	b := startBroker(t, ctx, cmd, user, password)
	api := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	b.waitReady(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1]), 2*time.Minute)
	code, body := b.call(t, http.MethodGet, api+"/v2/catalog", user, password, "")
	require.Equal(t, http.StatusOK, code, "%s", body)
	code, _ = b.call(t, http.MethodGet, api+"/v2/catalog", user, "wrong", "")
	assert.Equal(t, http.StatusUnauthorized, code)
	sandboxURL := fmt.Sprintf("http://127.0.0.1:%d/_sandbox/", ports[2])
	code, _ = b.call(t, http.MethodGet, sandboxURL, "", "", "")
	assert.Equal(t, http.StatusUnauthorized, code, "the sandbox's admin endpoints need credentials")
	code, _ = b.call(t, http.MethodGet, sandboxURL, "sandbox", env["APP_SANDBOX_ADMIN_PASSWORD"], "")
	assert.Equal(t, http.StatusOK, code, "docker.md's sandbox credentials")
	b.provision(t, api, "image", 5*time.Minute)
	entries, err := os.ReadDir(work)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Contains(t, names, "keb.db", "the database lives in the working directory, the image's /data volume")
}
