package runtimeclient

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Durations of a simulated runtime whose kubeconfig names none (written before the simulated
// backend's spec carried them).
const (
	DefaultSimulatedInstallDuration    = 3 * time.Second
	DefaultSimulatedConnectionDuration = 2 * time.Second
)

// Simulated is a runtime of the simulated backend: every request succeeds and the Kyma
// installation and the agent connection complete after durations from the request, which the
// simulated backend's spec sets (installationDuration, agentConnectionDuration) and its
// kubeconfigs carry.
type Simulated struct {
	InstallDuration    time.Duration
	ConnectionDuration time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (s Simulated) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (Simulated) ApplyOperatorBindings(context.Context, []string) error { return nil }
func (Simulated) ApplyKyma(context.Context, KymaSpec) error             { return nil }
func (Simulated) DeleteKyma(context.Context) error                      { return nil }
func (Simulated) WriteAgentConfig(context.Context, AgentConfig) error   { return nil }

func (s Simulated) KymaState(_ context.Context, _ KymaSpec, since time.Time) (string, string, error) {
	if s.now().Before(since.Add(s.InstallDuration)) {
		return KymaProcessing, "installing modules", nil
	}
	return KymaReady, "", nil
}

func (s Simulated) ConnectionState(_ context.Context, since time.Time) (string, error) {
	if s.now().Before(since.Add(s.ConnectionDuration)) {
		return "", nil
	}
	return ConnectionSynchronized, nil
}

// simulatedFor is the simulated runtime of a simulated kubeconfig's server URL: durations set in
// base win (tests), then those the URL carries, then the defaults.
func simulatedFor(base Simulated, server string) (Simulated, error) {
	u, err := url.Parse(server)
	if err != nil {
		return Simulated{}, fmt.Errorf("reading the simulated runtime's server URL: %w", err)
	}
	q := u.Query()
	for _, d := range []struct {
		param string
		dst   *time.Duration
		def   time.Duration
	}{
		{"installationDuration", &base.InstallDuration, DefaultSimulatedInstallDuration},
		{"agentConnectionDuration", &base.ConnectionDuration, DefaultSimulatedConnectionDuration},
	} {
		if *d.dst > 0 {
			continue
		}
		*d.dst = d.def
		if v := q.Get(d.param); v != "" {
			if *d.dst, err = time.ParseDuration(v); err != nil || *d.dst < 0 {
				return Simulated{}, fmt.Errorf("simulated runtime %s: invalid %s %q", u.Host, d.param, v)
			}
		}
	}
	return base, nil
}

// SimulatedKubeconfig is the kubeconfig of the simulated runtime runtimeID (what the simulated
// backend hands out); its server URL carries how long the runtime's Kyma installation and agent
// connection take.
func SimulatedKubeconfig(runtimeID string, installation, agentConnection time.Duration) string {
	return simulatedKubeconfig(runtimeID, fmt.Sprintf("%s%s?installationDuration=%s&agentConnectionDuration=%s",
		SimulatedScheme, runtimeID, installation, agentConnection))
}

func simulatedKubeconfig(name, server string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: %[2]s
contexts:
- name: %[1]s
  context:
    cluster: %[1]s
    user: admin
current-context: %[1]s
users:
- name: admin
  user:
    token: simulated
`, name, server)
}

// simulatedServer returns the server URL of a kubeconfig that is, byte for byte, one
// SimulatedKubeconfig writes; false for any other, which is parsed as YAML. The provisioner's
// steps open each new runtime's cluster, and parsing its kubeconfig with clientcmd showed in
// the broker's CPU profile at full load; this compares the text to the one the
// server line renders, so nothing else is taken for a simulated runtime.
func simulatedServer(kubeconfig string) (string, bool) {
	const line = "\n    server: "
	i := strings.Index(kubeconfig, line+SimulatedScheme)
	if i < 0 {
		return "", false
	}
	server, _, ok := strings.Cut(kubeconfig[i+len(line):], "\n")
	if !ok {
		return "", false
	}
	u, err := url.Parse(server)
	if err != nil || simulatedKubeconfig(u.Host, server) != kubeconfig {
		return "", false
	}
	return server, true
}
