// Package pgtest gives tests a real PostgreSQL server.
//
// Use it from a package's TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// and get an empty, private database per test with NewDatabase. The server is
// taken from KEB_TEST_DATABASE_URL (set by scripts/with-postgres.sh and
// "make test"); if that is unset, Main starts a throwaway cluster with
// scripts/postgres.sh for the lifetime of the test binary.
//
// Tests that need PostgreSQL fail, never skip, when no server is available:
// a silently skipped storage test is worse than a red build.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv"
	_ "github.com/lib/pq" // "postgres" driver for database/sql
)

// EnvURL names the environment variable holding the server URL
// (a superuser connection to the "postgres" database).
const EnvURL = "KEB_TEST_DATABASE_URL"

// Main runs the tests of a package against a PostgreSQL server and exits.
// If EnvURL is unset it starts a throwaway cluster first and removes it after
// m.Run; if it cannot start one it prints why and exits 1.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is Main returning the exit code, for a TestMain with work of its own around the tests.
func Run(m *testing.M) int {
	return testenv.Run(m, EnvURL, "PostgreSQL", startCluster)
}

// startCluster starts a cluster via scripts/postgres.sh, exports its URL in
// EnvURL (so subprocesses see it too) and returns a function stopping it.
func startCluster() (func(), error) {
	c, err := startScriptCluster()
	if err != nil {
		return nil, err
	}
	if err := os.Setenv(EnvURL, c.url); err != nil {
		c.remove()
		return nil, err
	}
	return func() {
		c.remove()
		_ = os.Unsetenv(EnvURL)
	}, nil
}

// cluster is a throwaway cluster of scripts/postgres.sh in dir.
type cluster struct {
	script, dir, url string
	reaper           *exec.Cmd
}

// startScriptCluster starts a cluster in a new directory under /tmp, with a reaper that
// removes it should this process die first.
func startScriptCluster() (*cluster, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	c := &cluster{script: filepath.Join(root, "scripts", "postgres.sh")}
	// /tmp rather than os.TempDir: the unprivileged cluster owner must be able
	// to reach it and the unix socket path must stay short.
	if c.dir, err = os.MkdirTemp("/tmp", "keb-pgtest-"); err != nil {
		return nil, err
	}
	cmd := exec.Command("bash", c.script, "start", c.dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		c.remove() // removes a half-initialised cluster
		return nil, fmt.Errorf("%s start: %w", c.script, err)
	}
	if c.url = strings.TrimSpace(string(out)); c.url == "" {
		c.remove()
		return nil, fmt.Errorf("%s start printed no URL", c.script)
	}
	// Safety net: if this process dies without running deferred code (test
	// timeout panic, SIGKILL, Ctrl-C), a detached reaper stops the cluster once
	// our pid is gone. Its own session keeps it out of our signals; it gets no
	// stdio so "go test" does not wait for it.
	c.reaper = exec.Command("bash", c.script, "reap", c.dir, fmt.Sprint(os.Getpid()))
	c.reaper.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.reaper.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: warning: cannot start reaper: %v\n", err)
		c.reaper = nil
	}
	return c, nil
}

// run runs one command of the script on the cluster.
func (c *cluster) run(command string) error {
	cmd := exec.Command("bash", c.script, command, c.dir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s %s: %w", c.script, command, c.dir, err)
	}
	return nil
}

// remove stops the cluster and removes its directory.
func (c *cluster) remove() {
	if c.reaper != nil {
		_ = c.reaper.Process.Kill()
		_ = c.reaper.Wait()
	}
	if err := c.run("stop"); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
	}
}

// repoRoot walks up from the working directory (a package dir under go test)
// to the directory holding go.mod.
// ServerURL returns the server URL (superuser, database "postgres") after
// checking that the server answers. It fails the test if none is available.
func ServerURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		t.Fatalf("pgtest: %s is not set: call pgtest.Main from TestMain, or run via scripts/with-postgres.sh / make test", EnvURL)
	}
	db, err := sql.Open("postgres", u)
	if err != nil {
		t.Fatalf("pgtest: open %s: %v", redact(u), err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("pgtest: PostgreSQL at %s not reachable: %v", redact(u), err)
	}
	return u
}

// NewDatabase creates a fresh, uniquely named, empty database, drops it when
// the test ends, and returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	server := ServerURL(t)

	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("pgtest: random name: %v", err)
	}
	// Only [a-z0-9_], so it needs no quoting.
	name := "keb_test_" + hex.EncodeToString(b[:])

	exec := func(query string) error {
		db, err := sql.Open("postgres", server)
		if err != nil {
			return err
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err = db.ExecContext(ctx, query)
		return err
	}
	if err := exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		// FORCE: a leaked connection in the test must not keep the database alive.
		if err := exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})

	u, err := url.Parse(server)
	if err != nil {
		t.Fatalf("pgtest: parse %s: %v", redact(server), err)
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String()
}

// redact hides the password so URLs can go into test logs.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "<unparsable URL>"
	}
	return u.Redacted()
}
