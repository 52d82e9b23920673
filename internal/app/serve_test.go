package app

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigurationVariableNames(t *testing.T) {
	t.Setenv("APP_PORT", "9090")
	t.Setenv("APP_BROKER_OPERATION_TIMEOUT", "2h")
	t.Setenv("APP_BROKER_DEFAULT_REQUEST_REGION", "cf-us30")
	t.Setenv("APP_RUNTIME_KYMA_VERSION", "2.21.0")
	t.Setenv("APP_BROKER_USERNAME", "u")
	t.Setenv("APP_DATABASE_DRIVER", "postgres")
	t.Setenv("APP_ENGINE_WORKERS", "7")
	t.Setenv("APP_DEFAULT_PROVISIONER", "gardener")
	cfg, err := Load()
	require.NoError(t, err)
	assert.Equal(t, 9090, cfg.Port)
	assert.Equal(t, 2*time.Hour, cfg.Broker.OperationTimeout)
	assert.Equal(t, "cf-us30", cfg.Broker.DefaultRequestRegion)
	assert.Equal(t, "2.21.0", cfg.Runtime.KymaVersion)
	assert.Equal(t, "u", cfg.Auth.Username)
	assert.Equal(t, "postgres", cfg.Database.Driver)
	assert.Equal(t, 7, cfg.Engine.Workers)
	assert.Equal(t, "gardener", cfg.Backends.Default)
	assert.Equal(t, []string{"istio", "api-gateway", "serverless", "eventing", "monitoring"}, cfg.Runtime.Components)
}

// A taken port failed only after the database and the engine had started, without naming the
// variable.
func TestServeFailsFastOnATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	dir := t.TempDir()
	t.Setenv("APP_PORT", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	t.Setenv("APP_DATABASE_PATH", filepath.Join(dir, "keb.db"))
	cfg, err := Load()
	require.NoError(t, err)
	log := logrus.New()
	log.SetOutput(io.Discard)
	err = Serve(context.Background(), cfg, log)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "APP_PORT")
	_, statErr := os.Stat(filepath.Join(dir, "keb.db"))
	assert.True(t, os.IsNotExist(statErr), "nothing was started before the bind")
}

// The generated password changed on every restart.
func TestGeneratedCredentialsSurviveRestarts(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keb.credentials")
	log := logrus.New()
	log.SetOutput(io.Discard)
	var passwords []string
	for range 2 {
		cfg := Config{CredentialsFile: file}
		_, err := authRoutes(context.Background(), &cfg, log)
		require.NoError(t, err)
		assert.Equal(t, generatedUser, cfg.Auth.Username)
		assert.Len(t, cfg.Auth.Password, 32)
		passwords = append(passwords, cfg.Auth.Password)
	}
	assert.Equal(t, passwords[0], passwords[1])
	st, err := os.Stat(file)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "readable by the owner only")
}

// A body trickled at one byte every few seconds held its connection for 75 s and more: the
// server's read timeout now ends it.
func TestTrickledBodyIsCutOff(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	t.Setenv("APP_PORT", strconv.Itoa(port))
	t.Setenv("APP_SANDBOX_ADDRESS", "127.0.0.1:0")
	t.Setenv("APP_SANDBOX_TLS_ADDRESS", "127.0.0.1:0")
	t.Setenv("APP_DATABASE_PATH", filepath.Join(dir, "keb.db"))
	t.Setenv("APP_BROKER_CREDENTIALS_FILE", filepath.Join(dir, "keb.credentials"))
	t.Setenv("APP_HTTP_READ_TIMEOUT", "1s")
	cfg, err := Load()
	require.NoError(t, err)
	log := logrus.New()
	log.SetOutput(io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, log) }()
	t.Cleanup(func() { cancel(); <-done })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond)

	password, err := os.ReadFile(filepath.Join(dir, "keb.credentials"))
	require.NoError(t, err)
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	// Authenticated, so that the handler reads the body.
	_, err = fmt.Fprintf(conn, "PUT /v2/service_instances/x?accepts_incomplete=true HTTP/1.1\r\nHost: %s\r\nAuthorization: Basic %s\r\nX-Broker-API-Version: 2.16\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
		addr, base64.StdEncoding.EncodeToString([]byte(generatedUser+":"+strings.TrimSpace(string(password)))))
	require.NoError(t, err)
	// 100 bytes at one byte per 100 ms would take 10 s; the server ends the request long before.
	cut := false
	start := time.Now()
	for i := 0; i < 100; i++ {
		if _, err := conn.Write([]byte("{")); err != nil {
			cut = true
			break
		}
		time.Sleep(100 * time.Millisecond)
		_ = conn.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := conn.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
			cut = true // closed by the server
			break
		}
	}
	assert.True(t, cut, "the connection outlived the read timeout")
	assert.Greater(t, time.Since(start), 900*time.Millisecond, "cut by the read timeout, not refused at once")
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Probes and scrapes reach /healthz, /readyz and /metrics on APP_STATUS_ADDRESS, a port apart
// from the OSB API's, which serves nothing else there.
func TestStatusListenerServesHealthAlone(t *testing.T) {
	dir := t.TempDir()
	free := func() int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		return ln.Addr().(*net.TCPAddr).Port
	}
	port, statusPort := free(), free()
	t.Setenv("APP_PORT", strconv.Itoa(port))
	t.Setenv("APP_STATUS_ADDRESS", "127.0.0.1:"+strconv.Itoa(statusPort))
	t.Setenv("APP_SANDBOX_ADDRESS", "127.0.0.1:0")
	t.Setenv("APP_SANDBOX_TLS_ADDRESS", "127.0.0.1:0")
	t.Setenv("APP_DATABASE_PATH", filepath.Join(dir, "keb.db"))
	t.Setenv("APP_BROKER_CREDENTIALS_FILE", filepath.Join(dir, "keb.credentials"))
	cfg, err := Load()
	require.NoError(t, err)
	log := logrus.New()
	log.SetOutput(io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, log) }()
	t.Cleanup(func() { cancel(); <-done })
	status := "http://127.0.0.1:" + strconv.Itoa(statusPort)
	get := func(url string) int {
		resp, err := http.Get(url)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Eventually(t, func() bool { return get(status+"/readyz") == http.StatusOK }, 30*time.Second, 50*time.Millisecond)
	assert.Equal(t, http.StatusOK, get(status+"/healthz"))
	assert.Equal(t, http.StatusOK, get(status+"/metrics"))
	assert.Equal(t, http.StatusNotFound, get(status+"/v2/catalog"), "the OSB API is not on the status port")
	assert.Equal(t, http.StatusOK, get("http://127.0.0.1:"+strconv.Itoa(port)+"/healthz"), "the API port still serves health")
}

// A taken status port fails the start before the database is opened, naming the variable.
func TestServeFailsFastOnATakenStatusPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	dir := t.TempDir()
	t.Setenv("APP_PORT", "0")
	t.Setenv("APP_STATUS_ADDRESS", ln.Addr().String())
	t.Setenv("APP_DATABASE_PATH", filepath.Join(dir, "keb.db"))
	cfg, err := Load()
	require.NoError(t, err)
	log := logrus.New()
	log.SetOutput(io.Discard)
	err = Serve(context.Background(), cfg, log)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "APP_STATUS_ADDRESS")
	_, statErr := os.Stat(filepath.Join(dir, "keb.db"))
	assert.True(t, os.IsNotExist(statErr), "nothing was started before the bind")
}
