package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// start runs the sandbox with args until ctx ends and returns its base URL and run's result.
func start(t *testing.T, ctx context.Context, args ...string) (string, <-chan error) {
	t.Helper()
	log := logrus.New()
	log.SetOutput(io.Discard)
	addrc := make(chan *standins.Listeners, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-address", "127.0.0.1:0", "-tls-address", "127.0.0.1:0"}, args...), log, func(l *standins.Listeners) { addrc <- l })
	}()
	select {
	case l := <-addrc:
		return l.URL, done
	case err := <-done:
		t.Fatalf("run returned early: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("sandbox did not start")
	}
	return "", nil
}

func stop(t *testing.T, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("sandbox did not stop")
	}
}

func get(t *testing.T, target string) (int, string) {
	t.Helper()
	resp, err := http.Get(target)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestRunServesTheSandboxWithFlagFaults(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, done := start(t, ctx, "-db", filepath.Join(t.TempDir(), "sandbox.db"), "-seed", "1", "-avs-client-id", "c", "-avs-client-secret", "s",
		"-avs-error-rate", "1", "-avs-latency", "10ms", "-avs-outage-from", "2030-01-01T00:00:00Z")
	get := func(path string) (int, string) { return get(t, base+path) }
	code, body := get("/_sandbox/avs/faults")
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"errorRate":1,"latency":"10ms","outageFrom":"2030-01-01T00:00:00Z"}`, body)

	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {"c"}, "client_secret": {"s"}}.Encode()
	resp, err := http.Post(base+"/avs/oauth/token", "application/x-www-form-urlencoded", strings.NewReader(form))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Contains(t, []int{500, 503}, resp.StatusCode)

	req, _ := http.NewRequest(http.MethodDelete, base+"/_sandbox/avs/faults", nil)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	resp, err = http.Post(base+"/avs/oauth/token", "application/x-www-form-urlencoded", strings.NewReader(form))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the configured credentials are accepted")

	code, body = get("/_sandbox/avs/objects")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"id":1000`, "the default parent evaluation")
	stop(t, cancel, done)
}

func TestRunKeepsTheStateInTheDatabaseFile(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sandbox.db")
	ctx, cancel := context.WithCancel(context.Background())
	base, done := start(t, ctx, "-db", db)
	req, _ := http.NewRequest(http.MethodPost, base+"/ias/service/sps", strings.NewReader(`sp_name=sp-1&company_id=global`))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("sandbox-ias-user", "sandbox-ias-password")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	code, before := get(t, base+"/_sandbox/ias/objects")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, before, `"display_name":"sp-1"`)
	stop(t, cancel, done)

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	base, done = start(t, ctx, "-db", db)
	_, after := get(t, base+"/_sandbox/ias/objects")
	assert.JSONEq(t, before, after, "the restarted sandbox has the service provider and its counts")
	req, _ = http.NewRequest(http.MethodPost, base+"/_sandbox/reset", nil)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	stop(t, cancel, done)

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	base, done = start(t, ctx, "-db", db)
	_, after = get(t, base+"/_sandbox/ias/objects")
	assert.NotContains(t, after, "sp-1", "the reset was durable")
	stop(t, cancel, done)
}

func TestRunRejectsBadFlags(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	for _, args := range [][]string{
		{"-avs-error-rate", "2"},
		{"-avs-outage-from", "tomorrow"},
		{"-avs-parent-ids", "x"},
		{"-no-such-flag"},
	} {
		err := run(context.Background(), append([]string{"-address", "127.0.0.1:0", "-tls-address", "127.0.0.1:0", "-db", filepath.Join(t.TempDir(), "s.db")}, args...), log, nil)
		assert.Error(t, err, "%v", args)
	}
}

func TestRunServesTheTLSListenerWithACertificateOfTheSandboxCA(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	lc := make(chan *standins.Listeners, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-address", "127.0.0.1:0", "-tls-address", "127.0.0.1:0", "-db", filepath.Join(t.TempDir(), "s.db")}, log,
			func(l *standins.Listeners) { lc <- l })
	}()
	var l *standins.Listeners
	select {
	case l = <-lc:
	case err := <-done:
		t.Fatalf("run returned early: %v", err)
	}
	defer stop(t, cancel, done)

	code, caPEM := get(t, l.URL+"/_sandbox/connector/ca.pem")
	require.Equal(t, http.StatusOK, code)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM([]byte(caPEM)))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	resp, err := client.Get(l.TLSURL + "/_sandbox/")
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.True(t, strings.HasPrefix(l.ConnectorURL(), l.TLSURL+"/connector/"))
}
