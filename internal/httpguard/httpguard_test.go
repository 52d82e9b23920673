package httpguard_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
)

// dial opens a raw connection to the broker, for requests net/http would not send.
func dial(t *testing.T, b *bt.Broker) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.URL, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(20*time.Second)))
	return conn, bufio.NewReader(conn)
}

func auth() string {
	return "Authorization: Basic " + basic(bt.Username, bt.Password) + "\r\n"
}

func basic(u, p string) string {
	req, _ := http.NewRequest(http.MethodGet, "http://x", nil)
	req.SetBasicAuth(u, p)
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
}

// Item 5 of issue 38: a request with both Content-Length and Transfer-Encoding is answered and
// its connection closed (RFC 9112 6.1), so the bytes after its body are never read as a second
// request (they were: a smuggled request).
func TestContentLengthAndTransferEncodingCloseTheConnection(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	conn, rd := dial(t, b)
	smuggled := "GET /runtimes HTTP/1.1\r\nHost: x\r\n" + auth() + "\r\n"
	_, err := fmt.Fprintf(conn, "POST /upgrade/kyma HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n%s", auth(), smuggled)
	require.NoError(t, err)
	resp, err := http.ReadResponse(rd, nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	assert.True(t, resp.Close, "the answer says Connection: close")
	rest, err := io.ReadAll(rd)
	require.NoError(t, err, "the server closed the connection")
	assert.Empty(t, string(rest), "the bytes after the body were not answered as a request")
}

// Item 8: a body over the limit announced with Expect: 100-continue gets 413 before anything is
// sent; a client that writes its whole body first reads the 413 instead of a reset.
func TestOversizedBodiesGetTheir413(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	const size = 4 << 20
	for _, path := range []string{"/upgrade/kyma", "/v2/service_instances/i-413"} {
		method := http.MethodPost
		if strings.HasPrefix(path, "/v2/") {
			method = http.MethodPut
		}
		head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\n%sX-Broker-API-Version: 2.16\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", method, path, auth(), size)

		conn, rd := dial(t, b)
		_, err := io.WriteString(conn, head+"Expect: 100-continue\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(rd, nil)
		require.NoError(t, err, path)
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%s: answered before the body (no 100 Continue)", path)
		resp.Body.Close()

		conn, rd = dial(t, b)
		_, err = io.WriteString(conn, head+"\r\n")
		require.NoError(t, err)
		_, err = conn.Write([]byte(strings.Repeat("x", size)))
		require.NoError(t, err, "%s: the server read the body rather than resetting the connection", path)
		resp, err = http.ReadResponse(rd, nil)
		require.NoError(t, err, path)
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, path)
		resp.Body.Close()
	}
}
