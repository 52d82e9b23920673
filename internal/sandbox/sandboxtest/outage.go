package sandboxtest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
)

// Outage makes system answer 503 for longer than the test runs.
func Outage(t testing.TB, sb *sandbox.Sandbox, system string) {
	t.Helper()
	now := time.Now()
	require.NoError(t, sb.SetFaults(system, sandbox.Faults{OutageFrom: now.Add(-time.Minute), OutageUntil: now.Add(time.Hour)}))
}
