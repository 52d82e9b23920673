package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// TokenIssuer is the OAuth2 client-credentials token endpoint and bearer-token check that stand-ins
// put in front of their APIs. It accepts one client, issues random opaque tokens that expire after a
// fixed lifetime, and keeps them in memory; tokens stay valid across a stand-in's Reset. It is safe
// for concurrent use.
type TokenIssuer struct {
	// Realm is the realm of the WWW-Authenticate challenge sent with bad client credentials.
	Realm string
	// Count, when not nil, is called with the events to count: "token" for every token request with
	// a supported grant type, "token" and "token.rejected" for one with bad client credentials, and
	// "unauthorized" for a request Protect turns away. It is called before the response is written.
	Count func(events ...string)

	clientID string
	secret   string
	// username and password: the resource owner the password grant accepts; none when empty.
	username, password string
	ttl                time.Duration
	now                func() time.Time

	mu     sync.Mutex
	tokens map[string]time.Time
}

// NewTokenIssuer returns a TokenIssuer that accepts only clientID with secret and issues tokens that
// live for ttl (one hour when not positive), measured with now (time.Now when nil).
func NewTokenIssuer(clientID, secret string, ttl time.Duration, now func() time.Time) *TokenIssuer {
	if ttl <= 0 {
		ttl = time.Hour
	}
	if now == nil {
		now = time.Now
	}
	return &TokenIssuer{clientID: clientID, secret: secret, ttl: ttl, now: now, tokens: map[string]time.Time{}}
}

// AcceptPassword makes the issuer also serve the resource owner password grant for the client,
// to username with password only (as the AVS token endpoint does).
func (t *TokenIssuer) AcceptPassword(username, password string) {
	t.username, t.password = username, password
}

type oauthError struct {
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description,omitempty"`
}

func (t *TokenIssuer) count(events ...string) {
	if t.Count != nil {
		t.Count(events...)
	}
}

// ServeToken serves a client-credentials token request (or, after AcceptPassword, a password
// grant one, with the resource owner's username and password in the form): the form must have
// grant_type client_credentials (or password) and the client credentials come from basic authentication or, without it, from
// the client_id and client_secret form fields.
func (t *TokenIssuer) ServeToken(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
	if err := r.ParseForm(); err != nil {
		WriteJSON(w, http.StatusBadRequest, oauthError{Error: "invalid_request", ErrorDescription: err.Error()})
		return
	}
	gt := r.PostForm.Get("grant_type")
	if gt != "client_credentials" && (gt != "password" || t.username == "") {
		WriteJSON(w, http.StatusBadRequest, oauthError{Error: "unsupported_grant_type",
			ErrorDescription: fmt.Sprintf("grant_type %q is not supported", gt)})
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	badOwner := gt == "password" && (r.PostForm.Get("username") != t.username || r.PostForm.Get("password") != t.password)
	if id == "" || id != t.clientID || secret != t.secret || badOwner {
		t.count("token", "token.rejected")
		w.Header().Set("WWW-Authenticate", fmt.Sprintf("Basic realm=%q", t.Realm))
		WriteJSON(w, http.StatusUnauthorized, oauthError{Error: "invalid_client", ErrorDescription: "bad client credentials"})
		return
	}
	t.count("token")
	buf := make([]byte, 24)
	_, _ = rand.Read(buf)
	tok := hex.EncodeToString(buf)
	t.mu.Lock()
	t.tokens[tok] = t.now().Add(t.ttl)
	t.mu.Unlock()
	WriteJSON(w, http.StatusOK, map[string]any{
		"access_token": tok,
		"token_type":   "bearer",
		"expires_in":   int(t.ttl.Seconds()),
	})
}

// Authorized reports whether r carries a bearer token this issuer issued and that has not expired.
func (t *TokenIssuer) Authorized(r *http.Request) bool {
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	t.mu.Lock()
	exp, ok := t.tokens[tok]
	t.mu.Unlock()
	return ok && strings.EqualFold(scheme, "Bearer") && t.now().Before(exp)
}

// Protect calls next for an Authorized request and answers any other with 401, a bearer challenge and
// a JSON body {"message": ...}.
func (t *TokenIssuer) Protect(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !t.Authorized(r) {
			t.count("unauthorized")
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			WriteJSON(w, http.StatusUnauthorized, errorBody{Message: "missing, unknown or expired bearer token"})
			return
		}
		next(w, r)
	}
}
