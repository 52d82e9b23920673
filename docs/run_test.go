package docs_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// scriptPrelude starts every file's script. docs_test_check judges one transcript command:
// its exit status against the one the transcript shows, and the first word of its output.
const scriptPrelude = `set -euo pipefail
trap 'echo "docs-test: failed at script line $LINENO" >&2' ERR
DOCS_TEST_OUT=$(mktemp)
docs_test_check() { # rc want-fail first-word where
	local got=""
	read -r got _ < <(grep -m1 -v '^[[:space:]]*$' "$DOCS_TEST_OUT" || true) || true
	if [[ $2 == 1 && $1 == 0 ]]; then echo "docs-test: $4: the transcript shows an error, the command succeeded" >&2; return 1; fi
	if [[ $2 == 0 && $1 != 0 ]]; then echo "docs-test: $4: the command exited $1" >&2; return 1; fi
	if [[ -n $3 && $got != "$3" ]]; then echo "docs-test: $4: output starts with \"$got\", the transcript shows \"$3\"" >&2; return 1; fi
}
`

// docScript is the bash script of one file's runnable blocks and, per script line, where it
// came from.
type docScript struct {
	text  strings.Builder
	where []string // where[i] is the source of script line i+1
}

func (s *docScript) add(line, where string) {
	for _, l := range strings.Split(strings.TrimSuffix(line, "\n"), "\n") {
		s.text.WriteString(l + "\n")
		s.where = append(s.where, where)
	}
}

// transcriptCommand is one "$ " command of a console block.
type transcriptCommand struct {
	line     int // in the block
	command  string
	output   []string
	wantFail bool
}

func parseTranscript(text string) []transcriptCommand {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	var cmds []transcriptCommand
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "$ ") {
			if len(cmds) > 0 {
				cmds[len(cmds)-1].output = append(cmds[len(cmds)-1].output, lines[i])
			}
			continue
		}
		c := transcriptCommand{line: i, command: strings.TrimPrefix(lines[i], "$ ")}
		for strings.HasSuffix(lines[i], `\`) && i+1 < len(lines) {
			i++
			c.command += "\n" + lines[i]
		}
		cmds = append(cmds, c)
	}
	// A transcript shows a failing command by its error line (kcp's "Error: ...", also after the
	// progress of --wait).
	for i := range cmds {
		for _, o := range cmds[i].output {
			if strings.HasPrefix(o, "Error:") {
				cmds[i].wantFail = true
			}
		}
	}
	return cmds
}

// firstWord is the first word of a transcript's output, unless it is elided.
func firstWord(output []string) string {
	for _, o := range output {
		if f := strings.Fields(o); len(f) > 0 {
			if f[0] == "..." {
				return ""
			}
			return f[0]
		}
	}
	return ""
}

func buildScript(blocks []docBlock) *docScript {
	s := &docScript{}
	s.add(scriptPrelude, "(prelude)")
	for _, b := range blocks {
		if !b.runnable() {
			continue
		}
		where := func(i int) string { return fmt.Sprintf("%s:%d", b.file, b.line+1+i) }
		s.add("echo '+++ "+b.String()+"' >&2", b.String())
		switch {
		case b.lang == "console":
			for _, c := range parseTranscript(b.text) {
				w := where(c.line)
				s.add("echo "+shellQuote("$ "+c.command), w)
				s.add("{ "+c.command, w)
				s.add(`} >"$DOCS_TEST_OUT" 2>&1 && docs_test_rc=0 || docs_test_rc=$?`, w)
				s.add(`cat "$DOCS_TEST_OUT"`, w)
				s.add(fmt.Sprintf("docs_test_check $docs_test_rc %d %s %s", map[bool]int{false: 0, true: 1}[c.wantFail],
					shellQuote(firstWord(c.output)), shellQuote(w)), w)
			}
		case b.background:
			s.add("(", b.String())
			for i, l := range strings.Split(strings.TrimSuffix(b.text, "\n"), "\n") {
				s.add(l, where(i))
			}
			s.add(") &", b.String())
		default:
			for i, l := range strings.Split(strings.TrimSuffix(b.text, "\n"), "\n") {
				s.add(l, where(i))
			}
		}
	}
	s.add("echo docs-test: done >&2", "(end)")
	return s
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// goShim stands in for go on the scripts' PATH: `go run ./cmd/NAME`, `go build -o OUT ./cmd/NAME`
// and `go install ./cmd/NAME` use the binaries built once for the test from this checkout (the
// same programs, without linking each one again per command); anything else is the real go.
const goShim = `#!/usr/bin/env bash
bin=%s
cmdname() { [[ $1 == ./cmd/* && -d $1 && -x $bin/${1#./cmd/} ]] && echo "${1#./cmd/}"; }
case "${1:-}" in
run) if n=$(cmdname "${2:-}"); then shift 2; exec "$bin/$n" "$@"; fi ;;
build) if [[ $# == 4 && $2 == -o ]] && n=$(cmdname "$4"); then cp "$bin/$n" "$3"; exit; fi ;;
install) if [[ $# == 2 ]] && n=$(cmdname "$2"); then mkdir -p "$GOBIN"; cp "$bin/$n" "$GOBIN/$n"; exit; fi ;;
esac
exec %s "$@"
`

// binaries builds every command of the module once into a directory and returns it, with a
// directory holding the go shim.
func binaries(t *testing.T, root string) (bin, shim string) {
	t.Helper()
	dir := t.TempDir()
	bin, shim = filepath.Join(dir, "bin"), filepath.Join(dir, "shim")
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	// KEB_DOCS_TEST_BIN names binaries already built from this checkout (go build -o DIR/ ./cmd/...),
	// to edit docs without linking every command again per run.
	if prebuilt := os.Getenv("KEB_DOCS_TEST_BIN"); prebuilt != "" {
		bin = prebuilt
	} else {
		build := exec.Command(goTool, "build", "-o", bin+"/", "./cmd/...")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building the commands: %v\n%s", err, out)
		}
	}
	if err := os.MkdirAll(shim, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shim, "go"), []byte(fmt.Sprintf(goShim, shellQuote(bin), shellQuote(goTool))), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, shim
}

// workDir is a checkout without its generated files: symlinks to the repository's entries, so
// "from the repository root" holds while whatever the commands write stays in the test's directory.
func workDir(t *testing.T, root string) string {
	t.Helper()
	work := t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if name == ".git" || strings.HasPrefix(name, "keb.") || strings.HasPrefix(name, "sandbox.db") {
			continue
		}
		if err := os.Symlink(filepath.Join(root, name), filepath.Join(work, name)); err != nil {
			t.Fatal(err)
		}
	}
	return work
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// docEnv is the environment of one file's script: the parent's without APP_* and KCP_*, free
// ports in the variables the docs name, and a home of its own.
func docEnv(t *testing.T, bin, shim string) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "APP_") || strings.HasPrefix(kv, "KCP_") || strings.HasPrefix(kv, "HOME=") ||
			strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "GOBIN=") ||
			strings.HasPrefix(kv, "XDG_CONFIG_HOME=") || strings.HasPrefix(kv, "GOPATH=") || strings.HasPrefix(kv, "GOMODCACHE=") ||
			strings.HasPrefix(kv, "GOCACHE=") || strings.HasPrefix(kv, "KEB_CACHE_DIR=") {
			continue
		}
		env = append(env, kv)
	}
	// A home of its own (kcp's config and login cache), but go's caches and the kube-apiserver
	// built by scripts/kube.sh stay where they are.
	goEnv, err := exec.Command("go", "env", "GOPATH", "GOMODCACHE", "GOCACHE").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	goVars := strings.Fields(string(goEnv))
	if len(goVars) != 3 {
		t.Fatalf("go env: %q", goEnv)
	}
	cache := os.Getenv("KEB_CACHE_DIR")
	if cache == "" {
		userHome, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(userHome, ".cache", "keb")
	}
	env = append(env, "GOPATH="+goVars[0], "GOMODCACHE="+goVars[1], "GOCACHE="+goVars[2], "KEB_CACHE_DIR="+cache)
	_, port, _ := net.SplitHostPort(freeAddr(t))
	home := t.TempDir()
	gobin := filepath.Join(home, "go", "bin")
	env = append(env,
		"HOME="+home,
		"GOBIN="+gobin,
		"PATH="+shim+":"+gobin+":"+bin+":"+os.Getenv("PATH"),
		"APP_PORT="+port,
		"APP_SANDBOX_ADDRESS="+freeAddr(t),
		"APP_SANDBOX_TLS_ADDRESS="+freeAddr(t),
		"APP_HEALTH_ADDRESS="+freeAddr(t),
		"KUBECONFIG="+os.Getenv(kubetest.EnvKubeconfig),
		"KEB_NAMESPACE="+fmt.Sprintf("keb-docs-%d", time.Now().UnixNano()%1_000_000_000),
	)
	return env
}

var failedLineRe = regexp.MustCompile(`docs-test: failed at script line (\d+)`)

// TestDocCommandsRun runs the shell blocks of each document as written, in order, in one bash per
// document, from a checkout of its own with the commands built from this one on PATH.
func TestDocCommandsRun(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// What the documents tell readers they need.
	var missing []string
	for _, tool := range []string{"bash", "curl", "jq", "openssl", "kubectl"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("the documents' commands need %s on PATH", strings.Join(missing, ", "))
	}
	bin, shim := binaries(t, root)
	for _, f := range docFiles(t, root) {
		blocks, err := parseDoc(root, f)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, b := range blocks {
			if b.runnable() {
				n++
			}
		}
		if n == 0 {
			continue
		}
		t.Run(strings.TrimSuffix(filepath.Base(f), ".md"), func(t *testing.T) {
			t.Parallel()
			runScript(t, buildScript(blocks), workDir(t, root), docEnv(t, bin, shim))
		})
	}
}

func runScript(t *testing.T, s *docScript, work string, env []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	logPath := filepath.Join(t.TempDir(), "out")
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.CommandContext(ctx, "bash", "-c", s.text.String())
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = work, env, out, out
	// Its own process group: the servers the document starts in the background end with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	start := time.Now()
	runErr := cmd.Run()
	if cmd.Process != nil {
		stopGroup(cmd.Process.Pid)
	}
	log, _ := os.ReadFile(logPath)
	if runErr != nil {
		where := "?"
		if m := failedLineRe.FindAllSubmatch(log, -1); len(m) > 0 {
			if i, err := strconv.Atoi(string(m[len(m)-1][1])); err == nil && i >= 1 && i <= len(s.where) {
				where = s.where[i-1]
			}
		}
		t.Fatalf("the document's commands failed at %s (%v, after %s):\n%s", where, runErr, time.Since(start).Round(time.Second), tail(string(log), 120))
	}
	if !strings.Contains(string(log), "docs-test: done") {
		t.Fatalf("the script did not run to its end:\n%s", tail(string(log), 60))
	}
	t.Logf("ran in %s", time.Since(start).Round(time.Second))
	if testing.Verbose() {
		t.Logf("output:\n%s", tail(string(log), 200))
	}
}

// stopGroup ends what the script left running: SIGTERM, then SIGKILL after a grace period.
func stopGroup(pgid int) {
	if syscall.Kill(-pgid, syscall.SIGTERM) != nil {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if syscall.Kill(-pgid, 0) != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
