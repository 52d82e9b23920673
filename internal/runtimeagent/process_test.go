package runtimeagent_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/runtimeagent"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// replica is a runtime-agent process.
type replica struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

// syncBuffer is the output a process writes while the test reads it.
type syncBuffer = testenv.SyncBuffer

func (r *replica) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// processes runs the real binary (cmd/runtime-agent) as replicas of one runtime's agent.
type processes struct {
	e      *env
	bin    string
	env    []string
	n      int
	mu     sync.Mutex
	active []*replica
}

func newProcesses(e *env) *processes {
	t := e.t
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	dir := t.TempDir()
	bin := filepath.Join(dir, "runtime-agent")
	build := exec.Command("go", "build", "-o", bin, "./cmd/runtime-agent")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, kubetest.Kubeconfig(t), 0o600))
	caFile := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(caFile, e.sb.CAPEM(), 0o600))
	c := e.cfg
	vars := map[string]string{
		"APP_KUBECONFIG": kubeconfig, "APP_AGENT_CONFIGURATION_SECRET": c.AgentConfigurationSecret,
		"APP_CLUSTER_CERTIFICATES_SECRET": c.ClusterCertificatesSecret, "APP_CA_CERTIFICATES_SECRET": c.CACertificatesSecret,
		"APP_COMPASS_CONNECTION_NAME": c.ConnectionName, "APP_CONTROLLER_SYNC_PERIOD": "100ms", "APP_MINIMAL_COMPASS_SYNC_TIME": "0s",
		"APP_CERT_KEY_BITS": "2048", "APP_CONNECTOR_CA_FILE": caFile, "APP_CREDENTIALS_NAMESPACE": c.CredentialsNamespace,
		"APP_RECONNECT_BACKOFF_MIN": "50ms", "APP_RECONNECT_BACKOFF_MAX": "500ms",
		"APP_LEADER_ELECTION_NAMESPACE": c.LeaderElectionNamespace, "APP_LEADER_ELECTION_NAME": c.LeaderElectionName,
		"APP_LEADER_ELECTION_LEASE_DURATION": c.LeaseDuration.String(), "APP_LEADER_ELECTION_RENEW_DEADLINE": c.RenewDeadline.String(),
		"APP_LEADER_ELECTION_RETRY_PERIOD": c.RetryPeriod.String(),
		"APP_HEALTH_ADDRESS":               "", "APP_LOG_LEVEL": "info",
	}
	p := &processes{e: e, bin: bin}
	for k, v := range vars {
		p.env = append(p.env, k+"="+v)
	}
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, r := range p.active {
			_ = r.cmd.Process.Signal(syscall.SIGCONT)
			_ = r.cmd.Process.Kill()
			<-r.done
		}
	})
	return p
}

// start starts a replica labelling the runtime's console URL with its own name, so that the
// Director shows which replica synchronised last.
func (p *processes) start() *replica {
	t := p.e.t
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	r := &replica{name: fmt.Sprintf("replica-%d", p.n), out: &syncBuffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(p.bin)
	r.cmd.Env = append(append(os.Environ(), p.env...), "APP_RUNTIME_CONSOLE_URL=https://"+r.name+".example.com")
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	require.NoError(t, r.cmd.Start())
	go func() {
		_ = r.cmd.Wait()
		close(r.done)
	}()
	p.active = append(p.active, r)
	return r
}

// leader is the replica holding the lease (waiting until one does).
func (p *processes) leader() *replica {
	e := p.e
	deadline := time.Now().Add(30 * time.Second)
	for {
		lease, err := e.core.CoordinationV1().Leases(e.ns).Get(e.ctx(), e.cfg.LeaderElectionName, metav1.GetOptions{})
		if err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
			id := *lease.Spec.HolderIdentity
			p.mu.Lock()
			for _, r := range p.active {
				if !r.exited() && strings.Contains(r.out.String(), id) {
					p.mu.Unlock()
					return r
				}
			}
			p.mu.Unlock()
		}
		require.True(e.t, time.Now().Before(deadline), "no live replica leads")
		time.Sleep(20 * time.Millisecond)
	}
}

// consoleLabel is the runtime's console URL label in the Director: who synchronised last.
func (e *env) consoleLabel() string {
	var rt struct {
		R struct {
			Labels map[string]any `json:"labels"`
		} `json:"r"`
	}
	sandboxtest.DirectorGraphQL(e.t, e.sb.URL, e.tenant, `query($id: ID!) { r: runtime(id: $id) { labels } }`, map[string]any{"id": e.runtimeID}, &rt)
	s, _ := rt.R.Labels[runtimeagent.LabelConsoleURL].(string)
	return s
}

// synchronizedWithValidCertificate waits until the CompassConnection says Synchronized with the
// stored certificate valid, checking on the way that no replica ever says a new token is needed
// while that certificate is valid.
func (e *env) synchronizedWithValidCertificate(what string) {
	e.t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		c, ok := e.connection()
		if ok && c.Status.ConnectionStatus != nil {
			require.NotContains(e.t, c.Status.ConnectionStatus.Error, runtimeagent.NewTokenNeeded, "%s: stranded", what)
		}
		if ok && c.Status.State == runtimeagent.Synchronized {
			cert, err := e.credentials().ClientCertificate()
			require.NoError(e.t, err)
			if time.Now().Before(cert.NotAfter) {
				return
			}
		}
		require.True(e.t, time.Now().Before(deadline), "%s: not Synchronized: %+v", what, c.Status)
		time.Sleep(20 * time.Millisecond)
	}
}

// The real binary, two replicas, kill -9 of the leader at random moments of a reconnection (the
// "Reconnect" tutorial), of renewals (forced with refreshCredentialsNow) and of synchronisations, then
// SIGSTOP of the leader until the other replica took the lease and SIGCONT: the runtime is never
// stranded while a valid certificate exists, and the resumed replica never acts again.
func TestKillAndPauseTheLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the agent's binary")
	}
	e := newEnv(t)
	p := newProcesses(e)
	p.start()
	p.start()
	e.synchronizedWithValidCertificate("first connection")

	kill := func(phase string, round int, during func()) {
		r := p.leader()
		during()
		time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond) // a random moment of the phase
		require.NoError(t, r.cmd.Process.Kill())
		<-r.done
		p.start()
		e.synchronizedWithValidCertificate(fmt.Sprintf("%s, round %d, after killing %s", phase, round, r.name))
	}
	for i := 0; i < 3; i++ {
		kill("reconnection", i, func() {
			e.newToken()
			require.NoError(t, e.dyn.Resource(runtimeagent.CompassConnectionGVR).Delete(e.ctx(), e.cfg.ConnectionName, metav1.DeleteOptions{}))
		})
	}
	for i := 0; i < 3; i++ {
		kill("renewal", i, func() {
			u, err := e.dyn.Resource(runtimeagent.CompassConnectionGVR).Get(e.ctx(), e.cfg.ConnectionName, metav1.GetOptions{})
			require.NoError(t, err)
			u.Object["spec"].(map[string]any)["refreshCredentialsNow"] = true
			_, _ = e.dyn.Resource(runtimeagent.CompassConnectionGVR).Update(e.ctx(), u, metav1.UpdateOptions{})
		})
	}
	for i := 0; i < 3; i++ {
		kill("sync", i, func() {
			for j := 0; j < 5; j++ {
				e.registerApp(fmt.Sprintf("%s-k%d-%d", e.prefix, i, j))
			}
		})
	}
	e.waitFor("the 15 applications", func(runtimeagent.CompassConnection) bool { return len(e.clusterApps()) == 15 })
	e.requireMatch()

	// SIGSTOP the leader past its lease; once the other replica leads and has synchronised,
	// SIGCONT it: it must not act again (its console label never comes back).
	paused := p.leader()
	require.NoError(t, paused.cmd.Process.Signal(syscall.SIGSTOP))
	var other *replica
	deadline := time.Now().Add(30 * time.Second)
	for other == nil || other == paused {
		require.True(t, time.Now().Before(deadline), "no other replica took over")
		other = p.leader()
	}
	takeover := time.Now()
	for e.consoleLabel() != "https://"+other.name+".example.com" {
		require.Less(t, time.Since(takeover), 30*time.Second, "the new leader did not synchronise: label %q, %s:\n%s", e.consoleLabel(), other.name, lastLines(other.out.String(), 15))
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, paused.cmd.Process.Signal(syscall.SIGCONT))
	resumed := time.Now()
	for time.Since(resumed) < 3*time.Second {
		label := e.consoleLabel()
		require.NotEqual(t, "https://"+paused.name+".example.com", label, "the resumed replica acted %v after SIGCONT", time.Since(resumed))
		time.Sleep(5 * time.Millisecond)
	}
	assert.Equal(t, other, p.leader(), "the lease stays with the new leader")
	out := paused.out.String()
	assert.True(t, strings.Contains(out, "not renewed in time") || strings.Contains(out, "no longer leading") || paused.exited(),
		"the resumed replica stopped acting: %s", lastLines(out, 10))
	e.synchronizedWithValidCertificate("after the pause")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
