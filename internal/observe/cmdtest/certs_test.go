package cmdtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The broker binary on its default exports when the certificates it holds expire, the embedded
// sandbox's CA and its TLS listener's certificate, as the chart's KEBCertificateExpiresSoon
// alert reads them: keb_certificate_expiry_timestamp_seconds{certificate="<purpose>"}.
func TestBrokerCertificateExpiry(t *testing.T) {
	dir := build(t)
	port := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "broker"))
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "APP_PORT="+port, "APP_SANDBOX_ADDRESS=127.0.0.1:0", "APP_SANDBOX_TLS_ADDRESS=127.0.0.1:0",
		"APP_BROKER_USERNAME=", "APP_BROKER_PASSWORD=", "APP_LOG_FORMAT=json")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	// The sandbox's addresses, from its log line.
	var sandbox struct{ Address, TLSAddress string }
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"tlsAddress"`) {
			require.NoError(t, json.Unmarshal(sc.Bytes(), &sandbox))
			break
		}
	}
	require.NotEmpty(t, sandbox.TLSAddress, "the sandbox's log line")
	go func() { _, _ = io.Copy(io.Discard, stderr) }()

	resp, err := http.Get(sandbox.Address + "/_sandbox/connector/ca.pem")
	require.NoError(t, err)
	caPEM, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	block, _ := pem.Decode(caPEM)
	require.NotNil(t, block, string(caPEM))
	ca, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	conn, err := tls.Dial("tcp", strings.TrimPrefix(sandbox.TLSAddress, "https://"), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only reads the served certificate
	require.NoError(t, err)
	served := conn.ConnectionState().PeerCertificates[0]
	conn.Close()

	var got map[string]float64
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://127.0.0.1:" + port + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
		if err != nil {
			return false
		}
		got = map[string]float64{}
		for _, m := range families["keb_certificate_expiry_timestamp_seconds"].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "certificate" {
					got[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
		return len(got) > 0
	}, time.Minute, 100*time.Millisecond)
	assert.Equal(t, map[string]float64{
		"sandbox-connector-ca": float64(ca.NotAfter.Unix()),
		"sandbox-tls":          float64(served.NotAfter.Unix()),
	}, got)
}
