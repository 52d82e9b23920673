// Package moduletest is for tests of modules. Start gives a real OCI registry: Debian's docker-registry (distribution),
// started by scripts/registry.sh on a random loopback port, optionally with basic auth and TLS,
// and stopped when the test ends. The script installs docker-registry with apt-get when it is
// missing, so "make test" needs nothing set up. Tests fail, never skip, without a registry.
package moduletest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv"
)

// Options choose the registry's security.
type Options struct {
	// Auth requires basic auth (user "keb", a random password).
	Auth bool
	// TLS serves HTTPS with a self-signed certificate (Registry.CAFile).
	TLS bool
}

// Registry is a running registry.
type Registry struct {
	// Addr is host:port on 127.0.0.1.
	Addr               string
	Username, Password string
	// CAFile is the certificate to trust (TLS only).
	CAFile string
	// Dir is the registry's directory (config, data, log).
	Dir string
}

// Script is the path of scripts/registry.sh.
func Script(t testing.TB) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatalf("moduletest: %v", err)
	}
	return filepath.Join(root, "scripts", "registry.sh")
}

// Start starts a registry for the test; it is stopped (and its data removed) at cleanup.
func Start(t testing.TB, o Options) *Registry {
	t.Helper()
	script := Script(t)
	dir, err := os.MkdirTemp("/tmp", "keb-registry-")
	if err != nil {
		t.Fatalf("moduletest: %v", err)
	}
	r := &Registry{Dir: dir}
	env := os.Environ()
	if o.Auth {
		r.Username, r.Password = "keb", fmt.Sprintf("pw-%d-%s", os.Getpid(), filepath.Base(dir))
		env = append(env, "KEB_REGISTRY_AUTH="+r.Username+":"+r.Password)
	}
	if o.TLS {
		env = append(env, "KEB_REGISTRY_TLS=1")
		r.CAFile = filepath.Join(dir, "ca.crt")
	}
	// With our pid the script leaves a reaper that stops the registry if this test binary dies
	// without running cleanups.
	cmd := exec.Command("bash", script, "start", dir, fmt.Sprint(os.Getpid()))
	cmd.Env = env
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		_ = exec.Command("bash", script, "stop", dir).Run()
		t.Fatalf("moduletest: %s start: %v", script, err)
	}
	r.Addr = strings.TrimSpace(string(out))
	t.Cleanup(func() {
		stop := exec.Command("bash", script, "stop", dir)
		stop.Stderr = os.Stderr
		if err := stop.Run(); err != nil {
			t.Errorf("moduletest: stop registry in %s: %v", dir, err)
		}
	})
	return r
}
