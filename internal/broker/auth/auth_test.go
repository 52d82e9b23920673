package auth_test

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/kelseyhightower/envconfig"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/broker/auth"
	"github.com/kyma-project/kyma-environment-broker/internal/broker/auth/authtest"
)

const (
	scope = "broker:write"
	admin = "runtimeAdmin"
)

// claimsHandler answers 200 with the claims the middleware stored.
var claimsHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	c, ok := auth.ClaimsFrom(r.Context())
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": ok, "claims": c})
})

type result struct {
	status int
	body   string
	header http.Header
}

func do(t *testing.T, h http.Handler, authz string) result {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/oauth/v2/catalog", nil)
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return result{status: rec.Code, body: rec.Body.String(), header: rec.Header()}
}

func newLogger() (*logrus.Logger, *logtest.Hook) {
	l, hook := logtest.NewNullLogger()
	l.SetLevel(logrus.DebugLevel)
	return l, hook
}

func newVerifier(t *testing.T, iss *authtest.Issuer, opts ...auth.Option) *auth.Verifier {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg := auth.Config{OIDCIssuer: iss.URL(), OIDCAudience: iss.Audience()}
	v, err := auth.NewVerifier(ctx, cfg, iss.Client(), opts...)
	require.NoError(t, err)
	return v
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestRequire(t *testing.T) {
	iss := authtest.NewIssuer(t)
	other := authtest.NewIssuer(t)
	log, hook := newLogger()
	v := newVerifier(t, iss, auth.WithLogger(log))
	h := v.Require(scope)(claimsHandler)

	good := map[string]any{"scope": scope}
	valid := iss.Token(good, time.Minute)
	parts := strings.Split(valid, ".")
	tampered := parts[0] + "." + b64(`{"iss":"`+iss.URL()+`","aud":"`+iss.Audience()+`","sub":"evil","scope":"`+scope+`","exp":9999999999}`) + "." + parts[2]
	noneToken := b64(`{"alg":"none","typ":"JWT","kid":"`+iss.KeyID()+`"}`) + "." +
		b64(`{"iss":"`+iss.URL()+`","aud":"`+iss.Audience()+`","sub":"x","scope":"`+scope+`","exp":9999999999}`) + "."

	// HS256 signed with the RSA public key as the HMAC secret (alg confusion).
	pubDER := mustPublicDER(t, iss)
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iss": iss.URL(), "aud": iss.Audience(), "sub": "x", "scope": scope, "exp": time.Now().Add(time.Minute).Unix(),
	})
	hs.Header["kid"] = iss.KeyID()
	hsToken, err := hs.SignedString(pubDER)
	require.NoError(t, err)

	cases := []struct {
		name   string
		authz  string
		status int
	}{
		{"no header", "", http.StatusUnauthorized},
		{"bearer without token", "Bearer", http.StatusUnauthorized},
		{"bearer with blank token", "Bearer    ", http.StatusUnauthorized},
		{"not a jwt", "Bearer not-a-jwt", http.StatusUnauthorized},
		{"three garbage segments", "Bearer a.b.c", http.StatusUnauthorized},
		{"two tokens", "Bearer " + valid + " " + valid, http.StatusUnauthorized},
		{"other scheme", "Token " + valid, http.StatusUnauthorized},
		{"basic scheme", "Basic dXNlcjpwYXNz", http.StatusUnauthorized},
		{"wrong signature (other key, same kid)", "Bearer " + iss.TokenSignedBy(iss.NewKey(), good, time.Minute), http.StatusUnauthorized},
		{"tampered payload", "Bearer " + tampered, http.StatusUnauthorized},
		{"token of another issuer", "Bearer " + other.Token(map[string]any{"scope": scope, "iss": iss.URL()}, time.Minute), http.StatusUnauthorized},
		{"wrong issuer", "Bearer " + iss.Token(map[string]any{"scope": scope, "iss": "https://evil.example"}, time.Minute), http.StatusUnauthorized},
		{"issuer with trailing slash", "Bearer " + iss.Token(map[string]any{"scope": scope, "iss": iss.URL() + "/"}, time.Minute), http.StatusUnauthorized},
		{"no issuer", "Bearer " + iss.Token(map[string]any{"scope": scope, "iss": nil}, time.Minute), http.StatusUnauthorized},
		{"wrong audience", "Bearer " + iss.Token(map[string]any{"scope": scope, "aud": "someone-else"}, time.Minute), http.StatusUnauthorized},
		{"no audience", "Bearer " + iss.Token(map[string]any{"scope": scope, "aud": nil}, time.Minute), http.StatusUnauthorized},
		{"expired", "Bearer " + iss.Token(good, -time.Minute), http.StatusUnauthorized},
		{"no exp", "Bearer " + iss.Token(map[string]any{"scope": scope, "exp": nil}, time.Minute), http.StatusUnauthorized},
		{"not yet valid", "Bearer " + iss.Token(map[string]any{"scope": scope, "nbf": time.Now().Add(time.Hour).Unix()}, 2*time.Hour), http.StatusUnauthorized},
		{"issued in the future", "Bearer " + iss.Token(map[string]any{"scope": scope, "iat": time.Now().Add(time.Hour).Unix()}, 2*time.Hour), http.StatusUnauthorized},
		{"alg none", "Bearer " + noneToken, http.StatusUnauthorized},
		{"alg HS256 with the public key", "Bearer " + hsToken, http.StatusUnauthorized},
		{"scope claim of the wrong type", "Bearer " + iss.Token(map[string]any{"scope": 42}, time.Minute), http.StatusUnauthorized},
		{"missing scope", "Bearer " + iss.Token(nil, time.Minute), http.StatusForbidden},
		{"other scope", "Bearer " + iss.Token(map[string]any{"scope": "broker:read"}, time.Minute), http.StatusForbidden},
		{"scope prefix only", "Bearer " + iss.Token(map[string]any{"scope": "broker:writer"}, time.Minute), http.StatusForbidden},
		{"valid", "Bearer " + valid, http.StatusOK},
		{"valid, lower-case scheme", "bearer " + valid, http.StatusOK},
		{"valid, scope among others", "Bearer " + iss.Token(map[string]any{"scope": "openid " + scope + " email"}, time.Minute), http.StatusOK},
		{"valid, scp array", "Bearer " + iss.Token(map[string]any{"scp": []string{"openid", scope}}, time.Minute), http.StatusOK},
		{"valid, audience array", "Bearer " + iss.Token(map[string]any{"scope": scope, "aud": []string{"x", iss.Audience()}}, time.Minute), http.StatusOK},
		{"valid, expired within leeway", "Bearer " + iss.Token(good, -5*time.Second), http.StatusOK},
	}
	// What the debug log must give as the cause (not the response).
	logged := map[string]string{
		"no header":                             "no authorization header",
		"other scheme":                          "not Bearer",
		"two tokens":                            "malformed bearer token",
		"wrong signature (other key, same kid)": "signature is invalid",
		"tampered payload":                      "signature is invalid",
		"token of another issuer":               "not found",
		"wrong issuer":                          "invalid issuer",
		"wrong audience":                        "invalid audience",
		"expired":                               "expired",
		"no exp":                                "exp claim is required",
		"not yet valid":                         "not valid yet",
		"issued in the future":                  "used before issued",
		"alg none":                              "signing method none is invalid",
		"alg HS256 with the public key":         "signing method HS256 is invalid",
		"missing scope":                         "lacks scope",
	}
	var unauthorizedBodies, forbiddenBodies []string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hook.Reset()
			r := do(t, h, tc.authz)
			require.Equal(t, tc.status, r.status, r.body)
			if want, ok := logged[tc.name]; ok {
				e := hook.LastEntry()
				require.NotNil(t, e)
				text := e.Data["reason"].(string)
				if err, ok := e.Data[logrus.ErrorKey].(error); ok {
					text += ": " + err.Error()
				}
				assert.Contains(t, text, want)
				assert.NotContains(t, r.body, want)
			}
			switch r.status {
			case http.StatusUnauthorized:
				unauthorizedBodies = append(unauthorizedBodies, r.body)
				assert.Equal(t, `Bearer realm="kyma-environment-broker"`, r.header.Get("WWW-Authenticate"))
				assert.Equal(t, "application/json", r.header.Get("Content-Type"))
			case http.StatusForbidden:
				forbiddenBodies = append(forbiddenBodies, r.body)
				assert.Empty(t, r.header.Get("WWW-Authenticate"))
			}
		})
	}
	require.NotEmpty(t, unauthorizedBodies)
	for _, b := range unauthorizedBodies {
		assert.JSONEq(t, `{"description":"unauthorized"}`, b)
		assert.Equal(t, unauthorizedBodies[0], b, "all 401 bodies must be byte-identical")
	}
	for _, b := range forbiddenBodies {
		assert.JSONEq(t, `{"description":"forbidden"}`, b)
		assert.Equal(t, forbiddenBodies[0], b)
	}

}

func TestDenialsAreLoggedAtDebug(t *testing.T) {
	iss := authtest.NewIssuer(t)
	log, hook := newLogger()
	v := newVerifier(t, iss, auth.WithLogger(log))
	h := v.Require(scope)(claimsHandler)
	require.Equal(t, http.StatusUnauthorized, do(t, h, "Bearer "+iss.Token(map[string]any{"scope": scope}, -time.Hour)).status)
	e := hook.LastEntry()
	require.NotNil(t, e)
	assert.Equal(t, logrus.DebugLevel, e.Level)
	assert.Equal(t, "invalid token", e.Data["reason"])
	assert.Equal(t, http.StatusUnauthorized, e.Data["status"])
	assert.Equal(t, "/oauth/v2/catalog", e.Data["path"])

	// At info level nothing is written for a denial.
	log.SetLevel(logrus.InfoLevel)
	hook.Reset()
	do(t, h, "")
	assert.Empty(t, hook.AllEntries())
}

func TestRequireStoresClaims(t *testing.T) {
	iss := authtest.NewIssuer(t)
	v := newVerifier(t, iss)
	tok := iss.Token(map[string]any{
		"sub": "alice", "email": "alice@example.com", "scope": "openid " + scope,
		"scp": []string{scope, "extra"}, "groups": []string{"dev", admin},
	}, time.Minute)
	var got auth.Claims
	h := v.Require(scope)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := auth.ClaimsFrom(r.Context())
		require.True(t, ok)
		got = c
	}))
	r := do(t, h, "Bearer "+tok)
	require.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, "alice", got.Subject)
	assert.Equal(t, "alice@example.com", got.Email)
	assert.Equal(t, []string{"dev", admin}, got.Groups)
	assert.Equal(t, []string{"openid", scope, "extra"}, got.Scopes)
	assert.Equal(t, iss.URL(), got.Issuer)
	assert.Equal(t, []string{iss.Audience()}, got.Audience)
	assert.WithinDuration(t, time.Now().Add(time.Minute), got.ExpiresAt, 5*time.Second)
	assert.True(t, got.HasScope(scope))
	assert.True(t, got.HasGroup(admin))

	_, ok := auth.ClaimsFrom(context.Background())
	assert.False(t, ok)
}

func TestRequireGroup(t *testing.T) {
	iss := authtest.NewIssuer(t)
	v := newVerifier(t, iss)
	h := v.RequireGroup(admin)(claimsHandler)

	cases := []struct {
		name   string
		authz  string
		status int
	}{
		{"no header", "", http.StatusUnauthorized},
		{"expired", "Bearer " + iss.Token(map[string]any{"groups": []string{admin}}, -time.Hour), http.StatusUnauthorized},
		{"groups of the wrong type", "Bearer " + iss.Token(map[string]any{"groups": []int{1}}, time.Minute), http.StatusUnauthorized},
		{"no groups", "Bearer " + iss.Token(map[string]any{"scope": scope}, time.Minute), http.StatusForbidden},
		{"other groups", "Bearer " + iss.Token(map[string]any{"groups": []string{"dev", "runtimeAdmins"}}, time.Minute), http.StatusForbidden},
		{"group as scope does not count", "Bearer " + iss.Token(map[string]any{"scope": admin}, time.Minute), http.StatusForbidden},
		{"in group", "Bearer " + iss.Token(map[string]any{"groups": []string{"dev", admin}}, time.Minute), http.StatusOK},
		{"single group as string", "Bearer " + iss.Token(map[string]any{"groups": admin}, time.Minute), http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, h, tc.authz)
			require.Equal(t, tc.status, r.status, r.body)
			switch tc.status {
			case http.StatusUnauthorized:
				assert.Equal(t, `{"description":"unauthorized"}`, r.body)
			case http.StatusForbidden:
				assert.Equal(t, `{"description":"forbidden"}`, r.body)
			case http.StatusOK:
				assert.Contains(t, r.body, `"ok":true`)
			}
		})
	}
}

func TestAuthenticate(t *testing.T) {
	iss := authtest.NewIssuer(t)
	v := newVerifier(t, iss)
	h := v.Authenticate()(claimsHandler)
	assert.Equal(t, http.StatusOK, do(t, h, "Bearer "+iss.Token(nil, time.Minute)).status)
	assert.Equal(t, http.StatusUnauthorized, do(t, h, "").status)
}

func TestES256(t *testing.T) {
	iss := authtest.NewIssuer(t, authtest.WithES256())
	v := newVerifier(t, iss)
	h := v.Require(scope)(claimsHandler)
	assert.Equal(t, http.StatusOK, do(t, h, "Bearer "+iss.Token(map[string]any{"scope": scope}, time.Minute)).status)
	assert.Equal(t, http.StatusUnauthorized,
		do(t, h, "Bearer "+iss.TokenSignedBy(iss.NewKey(), map[string]any{"scope": scope}, time.Minute)).status)
}

func TestKeyRotation(t *testing.T) {
	iss := authtest.NewIssuer(t)
	v := newVerifier(t, iss)
	h := v.Require(scope)(claimsHandler)

	old := iss.Token(map[string]any{"scope": scope}, time.Minute)
	require.Equal(t, http.StatusOK, do(t, h, "Bearer "+old).status)
	before := iss.JWKSRequests()
	oldKID := iss.KeyID()

	iss.Rotate()
	require.NotEqual(t, oldKID, iss.KeyID())
	fresh := iss.Token(map[string]any{"scope": scope}, time.Minute)
	r := do(t, h, "Bearer "+fresh)
	require.Equal(t, http.StatusOK, r.status, r.body)
	assert.Equal(t, before+1, iss.JWKSRequests(), "the unknown kid must trigger exactly one JWKS read")

	// The cache now holds only the published (new) key.
	assert.Equal(t, http.StatusUnauthorized, do(t, h, "Bearer "+old).status)
	assert.Equal(t, http.StatusOK, do(t, h, "Bearer "+fresh).status)
}

func TestUnknownKIDRefreshIsRateLimited(t *testing.T) {
	iss := authtest.NewIssuer(t)
	stranger := authtest.NewIssuer(t)
	v := newVerifier(t, iss, auth.WithJWKSRefresh(time.Hour, time.Hour))
	h := v.Require(scope)(claimsHandler)
	before := iss.JWKSRequests()

	start := time.Now()
	for range 20 {
		tok := stranger.Token(map[string]any{"scope": scope, "iss": iss.URL()}, time.Minute)
		require.Equal(t, http.StatusUnauthorized, do(t, h, "Bearer "+tok).status)
	}
	assert.LessOrEqual(t, iss.JWKSRequests()-before, 1, "unknown kids must not hammer the issuer")
	assert.Less(t, time.Since(start), 5*time.Second, "rate-limited requests fail fast")

	// Known keys keep working while refreshes are rate-limited.
	assert.Equal(t, http.StatusOK, do(t, h, "Bearer "+iss.Token(map[string]any{"scope": scope}, time.Minute)).status)
}

func TestNewVerifier(t *testing.T) {
	iss := authtest.NewIssuer(t)
	ctx := t.Context()

	t.Run("discovers the JWKS URL", func(t *testing.T) {
		v, err := auth.NewVerifier(ctx, auth.Config{OIDCIssuer: iss.URL(), OIDCAudience: iss.Audience()}, nil)
		require.NoError(t, err)
		assert.Equal(t, iss.JWKSURL(), v.JWKSURL())
		assert.Equal(t, iss.URL(), v.Issuer())
	})
	t.Run("explicit JWKS URL", func(t *testing.T) {
		v, err := auth.NewVerifier(ctx, auth.Config{OIDCIssuer: "https://issuer.example", OIDCJWKSURL: iss.JWKSURL(), OIDCAudience: iss.Audience()}, iss.Client())
		require.NoError(t, err)
		assert.Equal(t, iss.JWKSURL(), v.JWKSURL())
		tok := iss.Token(map[string]any{"scope": scope, "iss": "https://issuer.example"}, time.Minute)
		assert.Equal(t, http.StatusOK, do(t, v.Require(scope)(claimsHandler), "Bearer "+tok).status)
	})
	t.Run("issuer required", func(t *testing.T) {
		_, err := auth.NewVerifier(ctx, auth.Config{OIDCAudience: "a"}, nil)
		assert.ErrorIs(t, err, auth.ErrNoIssuer)
	})
	t.Run("audience required", func(t *testing.T) {
		_, err := auth.NewVerifier(ctx, auth.Config{OIDCIssuer: iss.URL()}, nil)
		assert.ErrorIs(t, err, auth.ErrNoAudience)
	})
	t.Run("discovery issuer mismatch", func(t *testing.T) {
		_, err := auth.NewVerifier(ctx, auth.Config{OIDCIssuer: iss.URL() + "/", OIDCAudience: "a"}, nil)
		assert.ErrorContains(t, err, "does not match")
	})
	t.Run("discovery unreachable", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		_, err := auth.NewVerifier(ctx, auth.Config{OIDCIssuer: srv.URL, OIDCAudience: "a"}, nil)
		assert.Error(t, err)
	})
	t.Run("discovery 404", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		defer srv.Close()
		_, err := auth.NewVerifier(ctx, auth.Config{OIDCIssuer: srv.URL, OIDCAudience: "a"}, nil)
		assert.ErrorContains(t, err, "status 404")
	})
	t.Run("invalid JWKS URL", func(t *testing.T) {
		_, err := auth.NewVerifier(ctx, auth.Config{OIDCIssuer: iss.URL(), OIDCJWKSURL: "ftp://x", OIDCAudience: "a"}, nil)
		assert.Error(t, err)
	})
	t.Run("JWKS down at start: built, tokens refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		log, _ := newLogger()
		v, err := auth.NewVerifier(ctx, auth.Config{OIDCIssuer: iss.URL(), OIDCJWKSURL: srv.URL + "/keys", OIDCAudience: iss.Audience()}, nil, auth.WithLogger(log))
		require.NoError(t, err)
		tok := iss.Token(map[string]any{"scope": scope}, time.Minute)
		assert.Equal(t, http.StatusUnauthorized, do(t, v.Require(scope)(claimsHandler), "Bearer "+tok).status)
	})
	t.Run("empty scope or group panics", func(t *testing.T) {
		v, err := auth.NewVerifier(ctx, auth.Config{OIDCIssuer: iss.URL(), OIDCAudience: iss.Audience()}, nil)
		require.NoError(t, err)
		assert.Panics(t, func() { v.Require("") })
		assert.Panics(t, func() { v.RequireGroup("") })
	})
}

func mustPublicDER(t *testing.T, iss *authtest.Issuer) []byte {
	t.Helper()
	// Read the published key back to get exactly what an attacker would use.
	resp, err := iss.Client().Get(iss.JWKSURL())
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var set struct {
		Keys []struct{ N, E string } `json:"keys"`
	}
	require.NoError(t, json.Unmarshal(body, &set))
	require.Len(t, set.Keys, 1)
	n, err := base64.RawURLEncoding.DecodeString(set.Keys[0].N)
	require.NoError(t, err)
	pub := &rsa.PublicKey{E: 65537}
	pub.N = new(big.Int).SetBytes(n)
	der, err := x509.MarshalPKIXPublicKey(pub)
	require.NoError(t, err)
	return der
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("APP_BROKER_USERNAME", "u")
	t.Setenv("APP_BROKER_PASSWORD", "p")
	t.Setenv("APP_BROKER_OIDC_ISSUER", "https://issuer.example")
	t.Setenv("APP_BROKER_OIDC_AUDIENCE", "keb")
	t.Setenv("APP_BROKER_ALLOW_BASIC_ON_OAUTH", "true")
	var cfg auth.Config
	require.NoError(t, envconfig.Process("APP", &cfg))
	assert.Equal(t, auth.Config{
		Username: "u", Password: "p", OIDCIssuer: "https://issuer.example", OIDCAudience: "keb",
		OIDCScope: "broker:write", OIDCAdminGroup: "runtimeAdmin", AllowBasicOnOAuth: true,
	}, cfg)
	assert.True(t, cfg.BasicEnabled())
	assert.True(t, cfg.OIDCEnabled())
	assert.Equal(t, "broker:write", cfg.Scope())
	assert.Equal(t, "runtimeAdmin", cfg.AdminGroup())
	assert.Equal(t, "broker:write", auth.Config{}.Scope())
	assert.Equal(t, "runtimeAdmin", auth.Config{}.AdminGroup())
	assert.False(t, auth.Config{}.BasicEnabled())
}
