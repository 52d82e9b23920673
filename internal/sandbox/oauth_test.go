package sandbox_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTokenIssuer(t *testing.T) {
	clk := sandboxtest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	issuer := sandbox.NewTokenIssuer("id", "secret", time.Minute, clk.Now)
	issuer.Realm = "test"
	var mu sync.Mutex
	counts := map[string]int{}
	issuer.Count = func(events ...string) {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range events {
			counts[ev]++
		}
	}
	request := func(form url.Values, user, pass string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/oauth/token", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if user != "" {
			r.SetBasicAuth(user, pass)
		}
		w := httptest.NewRecorder()
		issuer.ServeToken(w, r)
		return w
	}
	protected := issuer.Protect(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	call := func(auth string) int {
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		protected(w, r)
		return w.Code
	}

	w := request(url.Values{"grant_type": {"password"}}, "id", "secret")
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Contains(t, w.Body.String(), "unsupported_grant_type")

	w = request(url.Values{"grant_type": {"client_credentials"}}, "id", "wrong")
	assert.Equal(t, http.StatusUnauthorized, w.Code)
	assert.Equal(t, `Basic realm="test"`, w.Header().Get("WWW-Authenticate"))
	assert.Contains(t, w.Body.String(), "invalid_client")

	w = request(url.Values{"grant_type": {"client_credentials"}, "client_id": {"id"}, "client_secret": {"secret"}}, "", "")
	require.Equal(t, http.StatusOK, w.Code)
	var body struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int    `json:"expires_in"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	assert.Equal(t, "bearer", body.TokenType)
	assert.Equal(t, 60, body.ExpiresIn)
	require.NotEmpty(t, body.AccessToken)

	assert.Equal(t, http.StatusNoContent, call("Bearer "+body.AccessToken))
	assert.Equal(t, http.StatusNoContent, call("bearer "+body.AccessToken))
	assert.Equal(t, http.StatusUnauthorized, call("Basic "+body.AccessToken))
	assert.Equal(t, http.StatusUnauthorized, call("Bearer unknown"))
	assert.Equal(t, http.StatusUnauthorized, call(""))

	clk.Advance(time.Minute)
	r := httptest.NewRequest(http.MethodGet, "/x", nil)
	r.Header.Set("Authorization", "Bearer "+body.AccessToken)
	assert.False(t, issuer.Authorized(r), "token must expire after its TTL")

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]int{"token": 2, "token.rejected": 1, "unauthorized": 3}, counts)
}

func TestTokenIssuerDefaults(t *testing.T) {
	issuer := sandbox.NewTokenIssuer("id", "secret", 0, nil)
	r := httptest.NewRequest(http.MethodPost, "/oauth/token", strings.NewReader("grant_type=client_credentials"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.SetBasicAuth("id", "secret")
	w := httptest.NewRecorder()
	issuer.ServeToken(w, r)
	require.Equal(t, http.StatusOK, w.Code)
	assert.Contains(t, w.Body.String(), `"expires_in":3600`)
}
