// Package authtest runs a real OIDC issuer on loopback for tests: an
// httptest server serving /.well-known/openid-configuration and a JWKS with a
// key generated in the test, and signing tokens with that key.
//
//	iss := authtest.NewIssuer(t)
//	cfg := auth.Config{OIDCIssuer: iss.URL(), OIDCAudience: iss.Audience()}
//	v, _ := auth.NewVerifier(ctx, cfg, iss.Client())
//	tok := iss.Token(map[string]any{"scope": "broker:write"}, time.Minute)
package authtest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// DefaultAudience is the "aud" Token puts in when the claims name none.
const DefaultAudience = "kyma-environment-broker"

// Paths served by the issuer.
const (
	DiscoveryPath = "/.well-known/openid-configuration"
	JWKSPath      = "/keys"
)

// Option configures NewIssuer.
type Option func(*Issuer)

// WithES256 makes the issuer sign with an ECDSA P-256 key (ES256) instead of
// RSA 2048 (RS256).
func WithES256() Option { return func(i *Issuer) { i.alg = jwt.SigningMethodES256 } }

// WithAudience sets the default "aud" of the tokens.
func WithAudience(aud string) Option { return func(i *Issuer) { i.audience = aud } }

// Issuer is an OIDC issuer on a loopback httptest server.
type Issuer struct {
	t        testing.TB
	srv      *httptest.Server
	alg      jwt.SigningMethod
	audience string

	mu   sync.RWMutex
	key  crypto.Signer
	kid  string
	jwks []byte
	gen  int

	jwksRequests atomic.Int64
}

// NewIssuer starts the issuer; it stops when the test ends.
func NewIssuer(t testing.TB, opts ...Option) *Issuer {
	t.Helper()
	i := &Issuer{t: t, alg: jwt.SigningMethodRS256, audience: DefaultAudience}
	for _, o := range opts {
		o(i)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+DiscoveryPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer":                                i.URL(),
			"jwks_uri":                              i.JWKSURL(),
			"id_token_signing_alg_values_supported": []string{i.alg.Alg()},
			"response_types_supported":              []string{"code", "token"},
			"subject_types_supported":               []string{"public"},
		})
	})
	mux.HandleFunc("GET "+JWKSPath, func(w http.ResponseWriter, _ *http.Request) {
		i.jwksRequests.Add(1)
		i.mu.RLock()
		body := i.jwks
		i.mu.RUnlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	i.srv = httptest.NewServer(mux)
	t.Cleanup(i.srv.Close)
	i.Rotate()
	return i
}

// URL is the issuer identifier (the "iss" of its tokens), http://127.0.0.1:port.
func (i *Issuer) URL() string { return i.srv.URL }

// JWKSURL is the URL of the issuer's key set.
func (i *Issuer) JWKSURL() string { return i.srv.URL + JWKSPath }

// Audience is the default "aud" of the tokens.
func (i *Issuer) Audience() string { return i.audience }

// Client is an HTTP client for the issuer's server.
func (i *Issuer) Client() *http.Client { return i.srv.Client() }

// KeyID is the kid of the current signing key.
func (i *Issuer) KeyID() string {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.kid
}

// JWKSRequests counts the requests the JWKS endpoint has answered.
func (i *Issuer) JWKSRequests() int { return int(i.jwksRequests.Load()) }

// Rotate replaces the signing key with a new one under a new kid; the JWKS
// then publishes only the new key.
func (i *Issuer) Rotate() {
	i.t.Helper()
	key, err := newKey(i.alg)
	if err != nil {
		i.t.Fatalf("authtest: generating key: %v", err)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.gen++
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	kid := fmt.Sprintf("authtest-%s-%d-%x", i.alg.Alg(), i.gen, nonce)
	jwk, err := jwkset.NewJWKFromKey(key.Public(), jwkset.JWKOptions{
		Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: jwkset.ALG(i.alg.Alg()), USE: jwkset.UseSig},
	})
	if err != nil {
		i.t.Fatalf("authtest: JWK: %v", err)
	}
	store := jwkset.NewMemoryStorage()
	if err := store.KeyWrite(context.Background(), jwk); err != nil {
		i.t.Fatalf("authtest: JWK: %v", err)
	}
	body, err := store.JSONPublic(context.Background())
	if err != nil {
		i.t.Fatalf("authtest: JWKS: %v", err)
	}
	i.key, i.kid, i.jwks = key, kid, body
}

// Token signs a token with the current key. It fills in iss (URL()), aud
// (Audience()), sub ("test-user"), iat (now) and exp (now+ttl; a negative ttl
// gives an expired token) unless claims sets them; a claim set to nil is left
// out. Typical claims: "scope" ("broker:write"), "groups" ([]string{...}),
// "email".
func (i *Issuer) Token(claims map[string]any, ttl time.Duration) string {
	i.t.Helper()
	i.mu.RLock()
	key, kid := i.key, i.kid
	i.mu.RUnlock()
	return i.sign(key, kid, claims, ttl)
}

// TokenSignedBy signs like Token but with another key under the current kid:
// a token whose signature does not verify. key is an *rsa.PrivateKey for
// RS256 issuers, an *ecdsa.PrivateKey for ES256 ones.
func (i *Issuer) TokenSignedBy(key crypto.Signer, claims map[string]any, ttl time.Duration) string {
	i.t.Helper()
	return i.sign(key, i.KeyID(), claims, ttl)
}

func (i *Issuer) sign(key crypto.Signer, kid string, claims map[string]any, ttl time.Duration) string {
	now := time.Now()
	mc := jwt.MapClaims{
		"iss": i.URL(),
		"aud": i.audience,
		"sub": "test-user",
		"iat": now.Unix(),
		"exp": now.Add(ttl).Unix(),
	}
	for k, v := range claims {
		if v == nil {
			delete(mc, k)
			continue
		}
		mc[k] = v
	}
	tok := jwt.NewWithClaims(i.alg, mc)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		i.t.Fatalf("authtest: signing: %v", err)
	}
	return s
}

// NewKey generates a key of the issuer's kind (RSA 2048 or P-256), e.g. for
// TokenSignedBy.
func (i *Issuer) NewKey() crypto.Signer {
	i.t.Helper()
	k, err := newKey(i.alg)
	if err != nil {
		i.t.Fatalf("authtest: generating key: %v", err)
	}
	return k
}

func newKey(alg jwt.SigningMethod) (crypto.Signer, error) {
	if alg == jwt.SigningMethodES256 {
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	return rsa.GenerateKey(rand.Reader, 2048)
}
