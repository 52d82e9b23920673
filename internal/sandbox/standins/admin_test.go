package standins_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// On every interface the sandbox refuses to start without admin credentials; with them, its
// fault injection needs them while the CA certificate stays readable by the runtimes.
func TestListenBeyondLoopbackNeedsAdminCredentials(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := standins.Listen(ctx, standins.Options{}, "0.0.0.0:0", "0.0.0.0:0")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "APP_SANDBOX_ADMIN_PASSWORD")

	l, err := standins.Listen(ctx, standins.Options{Admin: sandbox.AdminConfig{Username: "sandbox", Password: "s3cret"}}, "0.0.0.0:0", "0.0.0.0:0")
	require.NoError(t, err)
	defer func() { _ = l.Shutdown(context.Background()) }()
	base := strings.Replace(l.URL, "0.0.0.0", "127.0.0.1", 1)
	resp, err := http.Get(base + "/_sandbox/connector/ca.pem")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), "BEGIN CERTIFICATE")

	put := func(user, password string) int {
		req, err := http.NewRequest(http.MethodPut, base+"/_sandbox/edp/faults", strings.NewReader(`{"errorRate": 1}`))
		require.NoError(t, err)
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusUnauthorized, put("", ""))
	assert.Equal(t, http.StatusOK, put("sandbox", "s3cret"))
}
