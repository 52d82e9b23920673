package profiling

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func freeAddress(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

func TestServesPprofOnLoopbackAndWritesTheCPUProfile(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := freeAddress(t)
	path := filepath.Join(t.TempDir(), "cpu.prof")
	stop, err := Start(ctx, Config{CPUProfile: path, PprofAddress: addr}, logrus.New())
	require.NoError(t, err)

	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), "heap profile")

	stop()
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Positive(t, info.Size(), "the CPU profile was written at stop")
	_, err = http.Get("http://" + addr + "/debug/pprof/")
	assert.Error(t, err, "stop ends the pprof server")
}

func TestRefusesAddressesOtherMachinesReach(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:6060", ":6060", "10.0.0.1:6060", "example.com:6060", "127.0.0.1"} {
		_, err := Start(context.Background(), Config{PprofAddress: addr}, logrus.New())
		assert.ErrorContains(t, err, "APP_PPROF_ADDRESS", addr)
	}
	_, err := Start(context.Background(), Config{CPUProfile: filepath.Join(t.TempDir(), "missing", "cpu.prof")}, logrus.New())
	assert.ErrorContains(t, err, "APP_CPU_PROFILE")
}
