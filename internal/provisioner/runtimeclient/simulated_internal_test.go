package runtimeclient

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fast path takes a simulated runtime's kubeconfig only as SimulatedKubeconfig writes it, and
// opens the same runtime as parsing it would; any other text is left to the YAML parser.
func TestSimulatedKubeconfigIsRecognisedOnlyAsWritten(t *testing.T) {
	for _, d := range [][2]time.Duration{{0, 0}, {3 * time.Second, 2 * time.Second}, {1500 * time.Millisecond, time.Hour}} {
		kc := SimulatedKubeconfig("48e7e9b2-e7ee-57a0-9b90-7fd7ef5caec6", d[0], d[1])
		server, ok := simulatedServer(kc)
		require.True(t, ok, kc)
		fast, err := Clusters{}.ForKubeconfig(kc)
		require.NoError(t, err)
		// The YAML parser's answer for the same text (a CRLF copy is not the written text).
		parsed, err := Clusters{}.ForKubeconfig(strings.ReplaceAll(kc, "\n", "\r\n"))
		require.NoError(t, err)
		assert.Equal(t, parsed, fast)
		assert.Equal(t, Simulated{InstallDuration: d[0], ConnectionDuration: d[1]}, fast)
		assert.True(t, strings.HasPrefix(server, SimulatedScheme))
	}

	kc := SimulatedKubeconfig("rt-1", time.Second, time.Second)
	for name, other := range map[string]string{
		"crlf":                  strings.ReplaceAll(kc, "\n", "\r\n"),
		"another context after": kc + "- name: real\n  context:\n    cluster: real\n",
		"the current context elsewhere": strings.Replace(kc, "current-context: rt-1", "current-context: real", 1) +
			"clusters:\n- name: real\n  cluster:\n    server: https://example.com\n",
		"the host is not the name": strings.Replace(kc, "server: simulated://rt-1", "server: simulated://rt-2", 1),
		"no final newline":         strings.TrimSuffix(kc, "\n"),
		"a real cluster":           strings.Replace(kc, "simulated://rt-1", "https://rt-1.example.com", 1),
	} {
		_, ok := simulatedServer(other)
		assert.False(t, ok, name)
	}
}
