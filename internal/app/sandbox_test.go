package app

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/director"
	"github.com/kyma-project/kyma-environment-broker/internal/externals"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durablesql"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
)

// TestEmbeddedSandboxKeepsItsStateInTheDatabase starts the embedded sandbox on the broker's SQLite
// database, registers a runtime in its Director, stops the sandbox and closes the database, then
// starts both again, as a restarted broker does: the Director still knows the runtime.
func TestEmbeddedSandboxKeepsItsStateInTheDatabase(t *testing.T) {
	t.Setenv("APP_SANDBOX_ADDRESS", "127.0.0.1:0")
	t.Setenv("APP_SANDBOX_TLS_ADDRESS", "127.0.0.1:0")
	cfg, err := externals.Load()
	require.NoError(t, err)
	log := logrus.New()
	log.SetOutput(io.Discard)
	db := driver.Config{Driver: driver.SQLite, Path: filepath.Join(t.TempDir(), "keb.db"), SecretKey: strings.Repeat("k", 32)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := func() (*director.Client, func()) {
		t.Helper()
		store, err := driver.Open(ctx, db, log)
		require.NoError(t, err)
		objects, err := durablesql.Open(ctx, store.Database(), log)
		require.NoError(t, err)
		built, stop, err := externalSystems(ctx, cfg, standins.Timeouts{}, log, objects, nil, nil)
		require.NoError(t, err)
		require.NotNil(t, built.Director)
		return built.Director, func() {
			stop()
			require.NoError(t, objects.Close())
			require.NoError(t, store.Close())
		}
	}

	dir, stop := start()
	id, err := dir.RegisterRuntime(ctx, "tenant", "rt-1", "c-1", "", nil)
	require.NoError(t, err)
	require.NoError(t, dir.UpdateRuntimeLabels(ctx, "tenant", id, map[string]string{director.ConsoleURLLabel: "https://console.c-1"}))
	stop()

	dir, stop = start()
	defer stop()
	again, err := dir.RegisterRuntime(ctx, "tenant", "rt-1", "c-1", "", nil)
	require.NoError(t, err)
	assert.Equal(t, id, again, "the Director found the runtime it registered before the restart")
	url, err := dir.GetConsoleURL(ctx, "tenant", "rt-1")
	require.NoError(t, err)
	assert.Equal(t, "https://console.c-1", url)
	_, err = dir.RequestOneTimeToken(ctx, "tenant", id)
	require.NoError(t, err)
}

// freeAddr is a loopback address nothing listens on (the sandbox takes its addresses from the
// configuration, not from a listener the test could hand it).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// The embedded sandbox's listeners live in the broker's process: a client that trickles its
// headers or body, or keeps a connection idle, is cut off after the broker listener's timeouts,
// on the plain and the TLS listener (issue 38: 50 of 50 such connections were open after 45 s).
func TestEmbeddedSandboxListenersHaveTheBrokersTimeouts(t *testing.T) {
	plainAddr, tlsAddr := freeAddr(t), freeAddr(t)
	t.Setenv("APP_SANDBOX_ADDRESS", plainAddr)
	t.Setenv("APP_SANDBOX_TLS_ADDRESS", tlsAddr)
	ext, err := externals.Load()
	require.NoError(t, err)
	log := logrus.New()
	log.SetOutput(io.Discard)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	store, err := driver.Open(ctx, driver.Config{Driver: driver.SQLite, Path: filepath.Join(t.TempDir(), "keb.db"), SecretKey: strings.Repeat("k", 32)}, log)
	require.NoError(t, err)
	defer store.Close()
	objects, err := durablesql.Open(ctx, store.Database(), log)
	require.NoError(t, err)
	defer objects.Close()
	cfg := Config{ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 600 * time.Millisecond, IdleTimeout: 600 * time.Millisecond}
	_, stop, err := externalSystems(ctx, ext, cfg.listenerTimeouts(), log, objects, nil, nil)
	require.NoError(t, err)
	defer stop()

	dial := map[string]func() (net.Conn, error){
		"http": func() (net.Conn, error) { return net.Dial("tcp", plainAddr) },
		"tls": func() (net.Conn, error) {
			return tls.Dial("tcp", tlsAddr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test only needs the connection
		},
	}
	// The hostile probes of the operator API, on both listeners: a query that does not parse is
	// 400, and a request with Content-Length and Transfer-Encoding closes its connection.
	for name, d := range dial {
		conn, err := d()
		require.NoError(t, err)
		require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
		rd := bufio.NewReader(conn)
		for _, q := range []string{strings.TrimSuffix(strings.Repeat("a=1&", 10_001), "&"), "a=%zz"} {
			_, err = io.WriteString(conn, "GET /_sandbox/?"+q+" HTTP/1.1\r\nHost: x\r\n\r\n")
			require.NoError(t, err)
			resp, err := http.ReadResponse(rd, nil)
			require.NoError(t, err, name)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s ?%.20s", name, q)
		}
		_, err = io.WriteString(conn, "POST /_sandbox/ HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\nGET /_sandbox/ HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(rd, nil)
		require.NoError(t, err, name)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		rest, err := io.ReadAll(rd)
		require.NoError(t, err, "%s: the server closed the connection", name)
		assert.Empty(t, string(rest), "%s: the bytes after the body were not answered", name)
		conn.Close()
	}
	// Each client stops halfway and waits: the server must close the connection long before
	// the 10 s the test waits.
	for name, d := range dial {
		for probe, sent := range map[string]string{
			"slow headers": "GET /_sandbox/ HTTP/1.1\r\nHost: x\r\n",
			"slow body":    "POST /_sandbox/ HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"a\":",
			"idle":         "GET /_sandbox/ HTTP/1.1\r\nHost: x\r\n\r\n",
		} {
			t.Run(name+"/"+probe, func(t *testing.T) {
				conn, err := d()
				require.NoError(t, err)
				defer conn.Close()
				_, err = conn.Write([]byte(sent))
				require.NoError(t, err)
				start := time.Now()
				require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
				_, err = io.Copy(io.Discard, conn) // until the server closes
				require.NoError(t, err, "the server closes the connection (EOF), not the test's deadline")
				assert.Less(t, time.Since(start), 5*time.Second)
			})
		}
	}
}
