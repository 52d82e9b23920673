// Package testenv is for tests: what the throwaway servers of the tests (pgtest's PostgreSQL,
// kubetest's kube-apiserver) share: running a package's tests with one, and finding the repository
// (its scripts and resources).
package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Run runs m and returns its exit code. Unless the variable env already names a server, it first
// starts a throwaway one with start (which exports env, so subprocesses see it too) and stops it
// after m.Run; if it cannot, it prints why, naming what, and returns 1. Panics and timeouts are
// left to the scripts' reapers.
func Run(m *testing.M, env, what string, start func() (stop func(), err error)) int {
	if os.Getenv(env) != "" {
		return m.Run()
	}
	stop, err := start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot start %s: %v\n", what, err)
		return 1
	}
	defer stop()
	return m.Run()
}

// RepoRoot is the repository holding the working directory (where go.mod is).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}
