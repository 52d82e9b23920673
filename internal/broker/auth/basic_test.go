package auth_test

import (
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/broker/auth"
	"github.com/kyma-project/kyma-environment-broker/internal/broker/auth/authtest"
)

func basicHeader(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

func TestBasic(t *testing.T) {
	mw, err := auth.NewBasic("broker", "s3cret:with:colons")
	require.NoError(t, err)
	h := mw(claimsHandler)

	cases := []struct {
		name   string
		authz  string
		status int
	}{
		{"ok", basicHeader("broker", "s3cret:with:colons"), http.StatusOK},
		{"ok, lower-case scheme", "basic " + base64.StdEncoding.EncodeToString([]byte("broker:s3cret:with:colons")), http.StatusOK},
		{"missing", "", http.StatusUnauthorized},
		{"wrong password", basicHeader("broker", "s3cret"), http.StatusUnauthorized},
		{"wrong username", basicHeader("admin", "s3cret:with:colons"), http.StatusUnauthorized},
		{"password with suffix", basicHeader("broker", "s3cret:with:colons!"), http.StatusUnauthorized},
		{"empty credentials", basicHeader("", ""), http.StatusUnauthorized},
		{"malformed base64", "Basic !!!", http.StatusUnauthorized},
		{"no colon", "Basic " + base64.StdEncoding.EncodeToString([]byte("broker")), http.StatusUnauthorized},
		{"bearer instead", "Bearer abc.def.ghi", http.StatusUnauthorized},
	}
	var bodies []string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, h, tc.authz)
			require.Equal(t, tc.status, r.status, r.body)
			if r.status == http.StatusUnauthorized {
				bodies = append(bodies, r.body)
				assert.Equal(t, `Basic realm="kyma-environment-broker"`, r.header.Get("WWW-Authenticate"))
				assert.Equal(t, "application/json", r.header.Get("Content-Type"))
			} else {
				// Basic auth carries no token claims.
				assert.Contains(t, r.body, `"ok":false`)
			}
		})
	}
	for _, b := range bodies {
		assert.Equal(t, `{"description":"unauthorized"}`, b)
	}
}

// A username with a colon cannot be sent in a basic header (the first colon ends it): the
// header for it is refused like any other wrong credential, however it is written.
func TestBasicUsernameWithColonNeverMatches(t *testing.T) {
	mw, err := auth.NewBasic("bro:ker", "pass")
	require.NoError(t, err)
	h := mw(claimsHandler)
	for _, authz := range []string{basicHeader("bro:ker", "pass"), basicHeader("bro", "ker:pass")} {
		assert.Equal(t, http.StatusUnauthorized, do(t, h, authz).status, authz)
	}
}

func TestBasicRefusesEmptyCredentials(t *testing.T) {
	for _, c := range [][2]string{{"", ""}, {"user", ""}, {"", "pass"}} {
		mw, err := auth.NewBasic(c[0], c[1])
		assert.ErrorIs(t, err, auth.ErrNoCredentials)
		assert.Nil(t, mw)
		assert.Panics(t, func() { auth.Basic(c[0], c[1]) })
	}
	assert.NotPanics(t, func() { auth.Basic("u", "p") })
}

func TestEither(t *testing.T) {
	iss := authtest.NewIssuer(t)
	v := newVerifier(t, iss)
	basic := auth.Basic("broker", "pw")

	t.Run("basic or scope (oauth routes with basic allowed)", func(t *testing.T) {
		h := auth.Either(basic, v.Require(scope))(claimsHandler)
		assert.Equal(t, http.StatusOK, do(t, h, basicHeader("broker", "pw")).status)
		assert.Equal(t, http.StatusOK, do(t, h, "Bearer "+iss.Token(map[string]any{"scope": scope}, time.Minute)).status)
		assert.Equal(t, http.StatusForbidden, do(t, h, "Bearer "+iss.Token(nil, time.Minute)).status)

		r := do(t, h, basicHeader("broker", "wrong"))
		assert.Equal(t, http.StatusUnauthorized, r.status)
		assert.Equal(t, `Basic realm="kyma-environment-broker"`, r.header.Get("WWW-Authenticate"))

		r = do(t, h, "")
		assert.Equal(t, http.StatusUnauthorized, r.status)
		assert.Equal(t, `Bearer realm="kyma-environment-broker"`, r.header.Get("WWW-Authenticate"))

		r2 := do(t, h, "Bearer junk")
		assert.Equal(t, r.body, r2.body)
		r3 := do(t, h, basicHeader("x", "y"))
		assert.Equal(t, r.body, r3.body, "basic and bearer 401 bodies are the same")
	})
	t.Run("basic or admin group (operator endpoints)", func(t *testing.T) {
		h := auth.Either(basic, v.RequireGroup(admin))(claimsHandler)
		assert.Equal(t, http.StatusOK, do(t, h, basicHeader("broker", "pw")).status)
		assert.Equal(t, http.StatusOK, do(t, h, "Bearer "+iss.Token(map[string]any{"groups": []string{admin}}, time.Minute)).status)
		assert.Equal(t, http.StatusForbidden, do(t, h, "Bearer "+iss.Token(map[string]any{"scope": scope}, time.Minute)).status)
		assert.Equal(t, http.StatusUnauthorized, do(t, h, "").status)
	})
	t.Run("nil basic means bearer only", func(t *testing.T) {
		h := auth.Either(nil, v.Require(scope))(claimsHandler)
		assert.Equal(t, http.StatusUnauthorized, do(t, h, basicHeader("broker", "pw")).status)
		assert.Equal(t, http.StatusOK, do(t, h, "Bearer "+iss.Token(map[string]any{"scope": scope}, time.Minute)).status)
	})
	t.Run("nil bearer means basic only", func(t *testing.T) {
		h := auth.Either(basic, nil)(claimsHandler)
		assert.Equal(t, http.StatusOK, do(t, h, basicHeader("broker", "pw")).status)
		assert.Equal(t, http.StatusUnauthorized, do(t, h, "Bearer "+iss.Token(map[string]any{"scope": scope}, time.Minute)).status)
	})
	t.Run("both nil panics", func(t *testing.T) {
		assert.Panics(t, func() { auth.Either(nil, nil) })
	})
}
