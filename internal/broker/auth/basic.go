package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strings"
)

// NewBasic builds the HTTP basic auth middleware. It returns ErrNoCredentials
// when username or password is empty: a broker is never left open by a
// missing variable.
//
// Missing or wrong credentials answer 401 with
// `WWW-Authenticate: Basic realm="kyma-environment-broker"` and
// {"description":"unauthorized"}. Comparison is constant-time.
func NewBasic(username, password string, opts ...Option) (func(http.Handler) http.Handler, error) {
	if username == "" || password == "" {
		return nil, ErrNoCredentials
	}
	o := buildOptions(opts)
	// Compare fixed-size digests so neither the content nor the length of the
	// expected credentials leaks through timing.
	wantUser := sha256.Sum256([]byte(username))
	wantPass := sha256.Sum256([]byte(password))
	// Platforms send the same header on every request: its digest is compared first (one hash,
	// no decoding). Any other form (scheme case, padding) is decoded and compared as before. A
	// username with a colon could never match after decoding, so it gets no such shortcut.
	var wantHeader *[sha256.Size]byte
	if !strings.Contains(username, ":") {
		h := sha256.Sum256([]byte("Basic " + base64.StdEncoding.EncodeToString([]byte(username+":"+password))))
		wantHeader = &h
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if wantHeader != nil {
				if h := r.Header["Authorization"]; len(h) > 0 {
					got := sha256.Sum256([]byte(h[0]))
					if subtle.ConstantTimeCompare(got[:], wantHeader[:]) == 1 {
						next.ServeHTTP(w, r)
						return
					}
				}
			}
			user, pass, ok := r.BasicAuth()
			if !ok {
				reason := "no basic credentials"
				if r.Header.Get("Authorization") != "" {
					reason = "malformed or non-basic authorization header"
				}
				logDenied(o.log, r, http.StatusUnauthorized, reason, nil)
				unauthorized(w, "Basic")
				return
			}
			gotUser := sha256.Sum256([]byte(user))
			gotPass := sha256.Sum256([]byte(pass))
			userOK := subtle.ConstantTimeCompare(gotUser[:], wantUser[:])
			passOK := subtle.ConstantTimeCompare(gotPass[:], wantPass[:])
			if userOK&passOK != 1 {
				logDenied(o.log, r, http.StatusUnauthorized, "wrong basic credentials", nil)
				unauthorized(w, "Basic")
				return
			}
			next.ServeHTTP(w, r)
		})
	}, nil
}

// Basic is NewBasic for wiring code that has already checked the
// credentials: it panics on an empty username or password instead of
// returning a middleware that would let requests through.
func Basic(username, password string) func(http.Handler) http.Handler {
	mw, err := NewBasic(username, password)
	if err != nil {
		panic(err)
	}
	return mw
}

// Either routes a request to basic when it carries Basic credentials (an
// Authorization header with the Basic scheme, well-formed or not) and to
// bearer otherwise. A nil basic means bearer only; a nil bearer means basic
// only; both nil panics.
func Either(basic, bearer func(http.Handler) http.Handler) func(http.Handler) http.Handler {
	switch {
	case basic == nil && bearer == nil:
		panic("auth: Either needs at least one middleware")
	case basic == nil:
		return bearer
	case bearer == nil:
		return basic
	}
	return func(next http.Handler) http.Handler {
		viaBasic := basic(next)
		viaBearer := bearer(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hasScheme(r, "basic") {
				viaBasic.ServeHTTP(w, r)
				return
			}
			viaBearer.ServeHTTP(w, r)
		})
	}
}

// hasScheme reports whether the Authorization header uses the given scheme
// (case-insensitive, as RFC 9110 says).
func hasScheme(r *http.Request, scheme string) bool {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	s, _, _ := strings.Cut(h, " ")
	return strings.EqualFold(s, scheme)
}
