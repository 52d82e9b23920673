package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunServesTheSandboxWithFlagFaults(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-address", "127.0.0.1:0", "-seed", "1", "-avs-client-id", "c", "-avs-client-secret", "s",
			"-avs-error-rate", "1", "-avs-latency", "10ms", "-avs-outage-from", "2030-01-01T00:00:00Z"}, log, func(a net.Addr) { addrc <- a })
	}()
	var base string
	select {
	case a := <-addrc:
		base = "http://" + a.String()
	case err := <-done:
		t.Fatalf("run returned early: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("sandbox did not start")
	}

	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
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

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("sandbox did not stop")
	}
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
		err := run(context.Background(), append([]string{"-address", "127.0.0.1:0"}, args...), log, nil)
		assert.Error(t, err, "%v", args)
	}
}
