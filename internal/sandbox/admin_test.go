package sandbox_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With a password, every /_sandbox/ endpoint (fault injection, reset, inspection) answers 401
// without the credentials; the stand-ins themselves stay as they were.
func TestAdminEndpointsNeedCredentials(t *testing.T) {
	var handled int
	admin := sandbox.AdminConfig{Username: "sandbox", Password: "s3cret"}
	sb, srvURL := sandboxtest.Serve(t, sandbox.Options{Admin: admin}, &countingSystem{name: "sys", handled: &handled})
	do := func(method, path, user, password, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, srvURL+path, strings.NewReader(body))
		require.NoError(t, err)
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized {
			assert.Contains(t, resp.Header.Get("WWW-Authenticate"), "Basic")
		}
		return resp.StatusCode
	}
	faults := `{"errorRate": 1}`
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/_sandbox/", ""}, {http.MethodPut, "/_sandbox/sys/faults", faults},
		{http.MethodPost, "/_sandbox/reset", ""}, {http.MethodPost, "/_sandbox/sys/reset", ""},
		{http.MethodGet, "/_sandbox/sys/objects", ""},
	} {
		assert.Equal(t, http.StatusUnauthorized, do(c.method, c.path, "", "", c.body), "%s %s without credentials", c.method, c.path)
		assert.Equal(t, http.StatusUnauthorized, do(c.method, c.path, "sandbox", "wrong", c.body), "%s %s with a wrong password", c.method, c.path)
	}
	f, err := sb.Faults("sys")
	require.NoError(t, err)
	assert.Zero(t, f.ErrorRate, "no fault was injected without credentials")

	assert.Equal(t, http.StatusOK, do(http.MethodPut, "/_sandbox/sys/faults", "sandbox", "s3cret", faults))
	f, err = sb.Faults("sys")
	require.NoError(t, err)
	assert.Equal(t, 1.0, f.ErrorRate)
	assert.Equal(t, http.StatusOK, do(http.MethodGet, "/_sandbox/", "sandbox", "s3cret", ""))
	// The stand-in's own API is not behind the admin credentials (its callers have their own).
	assert.NotEqual(t, http.StatusUnauthorized, do(http.MethodGet, "/sys/things", "", "", ""))
}

func TestAdminCheckRefusesOpenEndpointsBeyondLoopback(t *testing.T) {
	open := sandbox.AdminConfig{Username: "sandbox"}
	for _, addr := range []string{"127.0.0.1:8090", "[::1]:8090", "localhost:0"} {
		assert.NoError(t, open.Check(addr), addr)
	}
	for _, addr := range []string{"0.0.0.0:8090", ":8090", "10.0.0.7:8090", "[::]:8443"} {
		err := open.Check("127.0.0.1:8090", addr)
		require.Error(t, err, addr)
		assert.Contains(t, err.Error(), "APP_SANDBOX_ADMIN_PASSWORD")
	}
	assert.NoError(t, sandbox.AdminConfig{Username: "sandbox", Password: "p"}.Check("0.0.0.0:8090"))
}
