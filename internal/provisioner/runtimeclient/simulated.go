package runtimeclient

import (
	"context"
	"fmt"
	"net/url"
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
