package runtimeclient

import (
	"context"
	"time"
)

// Simulated is a runtime of the simulated backend: every request succeeds and the Kyma
// installation and the agent connection complete after fixed durations from the request.
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
