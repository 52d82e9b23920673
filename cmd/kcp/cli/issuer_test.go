package cli_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// issuer is an OIDC provider on loopback for kcp login's tests: discovery, JWKS, an authorization
// endpoint that approves at once (the test plays the user), the device endpoints of RFC 8628, and a
// token endpoint for the authorization code (with PKCE S256), device code and refresh grants, whose
// refresh tokens rotate and can be revoked.
type issuer struct {
	t        *testing.T
	srv      *httptest.Server
	key      *rsa.PrivateKey
	clientID string

	mu           sync.Mutex
	ttl          time.Duration // of the next ID tokens
	audience     string        // of the next ID tokens ("" = the client ID)
	badDiscovery bool
	badToken     bool // the token endpoint answers 200 with broken JSON
	codes        map[string]authCode
	devices      map[string]*device // by device code
	refresh      map[string]bool    // refresh tokens that are still valid
	grants       map[string]int     // token requests by grant type
}

type authCode struct{ challenge, redirect, nonce string }

type device struct {
	userCode string
	approved bool
}

const deviceGrant = "urn:ietf:params:oauth:grant-type:device_code"

func newIssuer(t *testing.T, clientID string) *issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	i := &issuer{t: t, key: key, clientID: clientID, ttl: time.Hour,
		codes: map[string]authCode{}, devices: map[string]*device{}, refresh: map[string]bool{}, grants: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", i.discovery)
	mux.HandleFunc("GET /keys", i.keys)
	mux.HandleFunc("GET /authorize", i.authorize)
	mux.HandleFunc("POST /device/code", i.deviceCode)
	mux.HandleFunc("GET /device", i.deviceVerify)
	mux.HandleFunc("POST /token", i.token)
	i.srv = httptest.NewServer(mux)
	t.Cleanup(i.srv.Close)
	return i
}

func (i *issuer) URL() string { return i.srv.URL }

func (i *issuer) set(f func(i *issuer)) {
	i.mu.Lock()
	defer i.mu.Unlock()
	f(i)
}

// revokeAll ends every session: refresh tokens answer invalid_grant from now on.
func (i *issuer) revokeAll() {
	i.set(func(i *issuer) { i.refresh = map[string]bool{} })
}

func (i *issuer) grantCount(grant string) int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.grants[grant]
}

func (i *issuer) discovery(w http.ResponseWriter, _ *http.Request) {
	i.mu.Lock()
	bad := i.badDiscovery
	i.mu.Unlock()
	if bad {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"issuer": "` + i.URL() + `", "token_endpoint": `))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                i.URL(),
		"authorization_endpoint":                i.URL() + "/authorize",
		"token_endpoint":                        i.URL() + "/token",
		"device_authorization_endpoint":         i.URL() + "/device/code",
		"jwks_uri":                              i.URL() + "/keys",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"code_challenge_methods_supported":      []string{"S256"},
		"grant_types_supported":                 []string{"authorization_code", "refresh_token", deviceGrant},
	})
}

func (i *issuer) keys(w http.ResponseWriter, _ *http.Request) {
	pub := i.key.PublicKey
	writeJSON(w, http.StatusOK, map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
		"n": base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes()),
	}}})
}

// authorize approves at once (the user is logged in at the issuer) and redirects with a code.
func (i *issuer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect := q.Get("redirect_uri")
	switch {
	case q.Get("client_id") != i.clientID:
		http.Error(w, "unknown client", http.StatusBadRequest)
		return
	case !strings.HasPrefix(redirect, "http://localhost:"):
		http.Error(w, "redirect_uri not allowed", http.StatusBadRequest)
		return
	case q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		http.Error(w, "a code with PKCE S256 is required", http.StatusBadRequest)
		return
	case !strings.Contains(" "+q.Get("scope")+" ", " openid "):
		http.Error(w, "scope openid is required", http.StatusBadRequest)
		return
	}
	code := random()
	i.set(func(i *issuer) {
		i.codes[code] = authCode{challenge: q.Get("code_challenge"), redirect: redirect, nonce: q.Get("nonce")}
	})
	http.Redirect(w, r, redirect+"?"+url.Values{"code": {code}, "state": {q.Get("state")}}.Encode(), http.StatusFound)
}

func (i *issuer) deviceCode(w http.ResponseWriter, r *http.Request) {
	if r.ParseForm() != nil || r.PostForm.Get("client_id") != i.clientID {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_client"})
		return
	}
	dc, uc := random(), strings.ToUpper(random()[:8])
	i.set(func(i *issuer) { i.devices[dc] = &device{userCode: uc} })
	writeJSON(w, http.StatusOK, map[string]any{
		"device_code": dc, "user_code": uc,
		"verification_uri":          i.URL() + "/device",
		"verification_uri_complete": i.URL() + "/device?user_code=" + uc,
		"expires_in":                300, "interval": 1,
	})
}

// deviceVerify is the user opening the verification URL with the code and approving.
func (i *issuer) deviceVerify(w http.ResponseWriter, r *http.Request) {
	uc := r.URL.Query().Get("user_code")
	found := false
	i.set(func(i *issuer) {
		for _, d := range i.devices {
			if d.userCode == uc {
				d.approved, found = true, true
			}
		}
	})
	if !found {
		http.Error(w, "unknown code", http.StatusNotFound)
		return
	}
	_, _ = w.Write([]byte("approved"))
}

func (i *issuer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	client := r.PostForm.Get("client_id")
	if u, _, ok := r.BasicAuth(); ok {
		client, _ = url.QueryUnescape(u)
	}
	if client != i.clientID {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	grant := r.PostForm.Get("grant_type")
	i.mu.Lock()
	defer i.mu.Unlock()
	i.grants[grant]++
	if i.badToken {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token": "x", "id_token": `))
		return
	}
	fail := func(code string) { writeJSON(w, http.StatusBadRequest, map[string]string{"error": code}) }
	nonce := ""
	switch grant {
	case "authorization_code":
		c, ok := i.codes[r.PostForm.Get("code")]
		delete(i.codes, r.PostForm.Get("code"))
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || c.redirect != r.PostForm.Get("redirect_uri") || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge {
			fail("invalid_grant")
			return
		}
		nonce = c.nonce
	case deviceGrant:
		d, ok := i.devices[r.PostForm.Get("device_code")]
		switch {
		case !ok:
			fail("invalid_grant")
			return
		case !d.approved:
			fail("authorization_pending")
			return
		}
		delete(i.devices, r.PostForm.Get("device_code"))
	case "refresh_token":
		rt := r.PostForm.Get("refresh_token")
		if !i.refresh[rt] {
			fail("invalid_grant")
			return
		}
		delete(i.refresh, rt) // rotated
	default:
		fail("unsupported_grant_type")
		return
	}
	rt := random()
	i.refresh[rt] = true
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": random(), "token_type": "Bearer", "expires_in": int(i.ttl.Seconds()),
		"refresh_token": rt, "id_token": i.sign(nonce),
	})
}

// sign makes an ID token of the operator (in the broker's admin group); i.mu is held.
func (i *issuer) sign(nonce string) string {
	aud := i.audience
	if aud == "" {
		aud = i.clientID
	}
	now := time.Now()
	claims := jwt.MapClaims{
		"iss": i.URL(), "aud": aud, "sub": "operator-1", "email": "operator@example.com",
		"groups": []string{"runtimeAdmin"}, "iat": now.Unix(), "exp": now.Add(i.ttl).Unix(),
	}
	if nonce != "" {
		claims["nonce"] = nonce
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(i.key)
	if err != nil {
		i.t.Errorf("signing: %v", err)
	}
	return s
}

func random() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
