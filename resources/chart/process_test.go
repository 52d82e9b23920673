package chart_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// runningBroker is a broker binary the test started: its exit, its output, and the basic auth of
// its OSB API.
type runningBroker struct {
	ctx            context.Context
	exited         chan error
	logs           *bytes.Buffer
	user, password string
}

// startBroker starts cmd, keeping its output, and stops it at the end of the test (SIGTERM, then
// SIGKILL after 20 s), printing its output if the test failed.
func startBroker(t *testing.T, ctx context.Context, cmd *exec.Cmd, user, password string) *runningBroker {
	t.Helper()
	b := &runningBroker{ctx: ctx, exited: make(chan error, 1), logs: &bytes.Buffer{}, user: user, password: password}
	cmd.Stdout, cmd.Stderr = b.logs, b.logs
	require.NoError(t, cmd.Start())
	go func() { b.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-b.exited
		}
		if t.Failed() {
			t.Logf("broker log:\n%s", b.logs.String())
		}
	})
	return b
}

// call sends a request with the OSB API version header, and basic auth when u is set; the code is
// 0 when the request could not be sent.
func (b *runningBroker) call(t *testing.T, method, url, u, p, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(b.ctx, method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Broker-API-Version", "2.16")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if u != "" {
		req.SetBasicAuth(u, p)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// waitReady waits until url answers 200, failing the test if the broker exits first or within
// passes.
func (b *runningBroker) waitReady(t *testing.T, url string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if code, _ := b.call(t, http.MethodGet, url, "", "", ""); code == http.StatusOK {
			return
		}
		select {
		case err := <-b.exited:
			t.Fatalf("the broker exited: %v\n%s", err, b.logs.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "%s not ready within %s", url, within)
		time.Sleep(100 * time.Millisecond)
	}
}

// provision provisions an AWS runtime through the OSB API at api and waits for the operation to
// succeed.
func (b *runningBroker) provision(t *testing.T, api, name string, within time.Duration) {
	t.Helper()
	id := name + "-" + randomHex(t, 6)
	code, body := b.call(t, http.MethodPut, api+"/oauth/v2/service_instances/"+id+"?accepts_incomplete=true", b.user, b.password, fmt.Sprintf(`{
		"service_id": "47c9dcbf-ff30-448e-ab36-d3bad66ba281", "plan_id": "361c511f-f939-4621-b228-d0fb79a1fe15",
		"context": {"globalaccount_id": "ga-%[1]s", "subaccount_id": "sa-%[1]s", "user_id": "me@example.com"},
		"parameters": {"name": "%[1]s-runtime", "region": "eu-central-1"}}`, name))
	require.Equal(t, http.StatusAccepted, code, "%s", body)
	var last struct {
		State       string `json:"state"`
		Description string `json:"description"`
	}
	deadline := time.Now().Add(within)
	for last.State != "succeeded" {
		require.True(t, time.Now().Before(deadline), "provisioning not done within %s: %+v", within, last)
		time.Sleep(250 * time.Millisecond)
		code, body := b.call(t, http.MethodGet, api+"/oauth/v2/service_instances/"+id+"/last_operation", b.user, b.password, "")
		require.Equal(t, http.StatusOK, code, "%s", body)
		require.NoError(t, json.Unmarshal(body, &last))
		require.NotEqual(t, "failed", last.State, "provisioning failed: %s", last.Description)
	}
}
