package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

// AllowedAlgorithms are the only JWS algorithms a token may be signed with.
var AllowedAlgorithms = []string{"RS256", "ES256"}

const (
	httpTimeout = 10 * time.Second
	// unknownKIDWaitMax bounds how long a request with an unknown kid may wait
	// for the rate limiter plus the JWKS fetch; when the next allowed refresh
	// is further away the request fails at once.
	unknownKIDWaitMax = 5 * time.Second
	maxDiscoveryBytes = 1 << 20
)

// Verifier checks bearer JWTs against an OIDC issuer's JWKS. The keys are
// cached, re-read in the background, and re-read on a token with an unknown
// kid (rate-limited). It is safe for concurrent use.
type Verifier struct {
	issuer   string
	audience string
	jwksURL  string
	keys     keyfunc.Keyfunc
	parser   *jwt.Parser
	o        options
}

// NewVerifier builds a Verifier from cfg. cfg.OIDCIssuer and cfg.OIDCAudience
// are required. Without cfg.OIDCJWKSURL the JWKS URL is discovered from
// <issuer>/.well-known/openid-configuration (whose "issuer" must equal
// cfg.OIDCIssuer); a failed discovery is an error. A JWKS that cannot be read
// at start is logged and read again when a token arrives. ctx ends the
// background refresh. client nil means a client with a 10s timeout.
func NewVerifier(ctx context.Context, cfg Config, client *http.Client, opts ...Option) (*Verifier, error) {
	issuer := strings.TrimSpace(cfg.OIDCIssuer)
	audience := strings.TrimSpace(cfg.OIDCAudience)
	if issuer == "" {
		return nil, ErrNoIssuer
	}
	if audience == "" {
		return nil, ErrNoAudience
	}
	if client == nil {
		client = &http.Client{Timeout: httpTimeout}
	}
	o := buildOptions(opts)

	jwksURL := strings.TrimSpace(cfg.OIDCJWKSURL)
	if jwksURL == "" {
		var err error
		if jwksURL, err = discoverJWKSURL(ctx, client, issuer); err != nil {
			return nil, err
		}
	}
	if u, err := url.Parse(jwksURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("auth: invalid JWKS URL %q", jwksURL)
	}

	log := o.log.WithField("jwks_url", jwksURL)
	store, err := jwkset.NewStorageFromHTTP(jwksURL, jwkset.HTTPClientStorageOptions{
		Client:                    client,
		Ctx:                       ctx,
		HTTPTimeout:               httpTimeout,
		NoErrorReturnFirstHTTPReq: true,
		RefreshInterval:           o.refreshInterval,
		RefreshErrorHandler: func(_ context.Context, err error) {
			log.WithError(err).Warn("auth: reading the OIDC JWKS failed")
		},
	})
	if err != nil {
		return nil, fmt.Errorf("auth: JWKS storage: %w", err)
	}
	keys, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs:          map[string]jwkset.Storage{jwksURL: store},
		PrioritizeHTTP:    true,
		RateLimitWaitMax:  unknownKIDWaitMax,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(o.unknownKIDEvery), 1),
	})
	if err != nil {
		return nil, fmt.Errorf("auth: JWKS client: %w", err)
	}
	kf, err := keyfunc.New(keyfunc.Options{
		Ctx:          ctx,
		Storage:      keys,
		UseWhitelist: []jwkset.USE{jwkset.UseSig, ""},
	})
	if err != nil {
		return nil, fmt.Errorf("auth: keyfunc: %w", err)
	}

	return &Verifier{
		issuer:   issuer,
		audience: audience,
		jwksURL:  jwksURL,
		keys:     kf,
		parser: jwt.NewParser(
			jwt.WithValidMethods(AllowedAlgorithms),
			jwt.WithIssuer(issuer),
			jwt.WithAudience(audience),
			jwt.WithLeeway(o.leeway),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
		),
		o: o,
	}, nil
}

// Issuer is the issuer tokens must carry.
func (v *Verifier) Issuer() string { return v.issuer }

// JWKSURL is where the keys are read (configured or discovered).
func (v *Verifier) JWKSURL() string { return v.jwksURL }

// Verify checks a raw JWT (without "Bearer ") and returns its claims. The
// error says why it was refused; never show it to the caller.
func (v *Verifier) Verify(ctx context.Context, raw string) (Claims, error) {
	var tc tokenClaims
	tok, err := v.parser.ParseWithClaims(raw, &tc, v.keys.KeyfuncCtx(ctx))
	if err != nil {
		return Claims{}, err
	}
	if !tok.Valid {
		return Claims{}, errors.New("token not valid")
	}
	return tc.toClaims(), nil
}

// Authenticate requires a valid bearer token and nothing more: 401 otherwise.
func (v *Verifier) Authenticate() func(http.Handler) http.Handler {
	return v.middleware(func(Claims) (bool, string) { return true, "" })
}

// Require requires a valid bearer token whose scope ("scope" space-separated
// string or "scp" array) contains scope: 401 for a missing or invalid token,
// 403 for a valid one without the scope. It panics on an empty scope.
func (v *Verifier) Require(scope string) func(http.Handler) http.Handler {
	if scope == "" {
		panic("auth: Require needs a scope")
	}
	return v.middleware(func(c Claims) (bool, string) {
		return c.HasScope(scope), "token lacks scope " + scope
	})
}

// RequireGroup requires a valid bearer token whose "groups" contains group:
// 401 for a missing or invalid token, 403 for a valid one outside the group.
// It panics on an empty group.
func (v *Verifier) RequireGroup(group string) func(http.Handler) http.Handler {
	if group == "" {
		panic("auth: RequireGroup needs a group")
	}
	return v.middleware(func(c Claims) (bool, string) {
		return c.HasGroup(group), "token lacks group " + group
	})
}

func (v *Verifier) middleware(allow func(Claims) (bool, string)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			raw, reason := bearerToken(r)
			if reason != "" {
				logDenied(v.o.log, r, http.StatusUnauthorized, reason, nil)
				unauthorized(w, "Bearer")
				return
			}
			claims, err := v.Verify(r.Context(), raw)
			if err != nil {
				logDenied(v.o.log, r, http.StatusUnauthorized, "invalid token", err)
				unauthorized(w, "Bearer")
				return
			}
			if ok, why := allow(claims); !ok {
				logDenied(v.o.log.WithField("sub", claims.Subject), r, http.StatusForbidden, why, nil)
				forbidden(w)
				return
			}
			next.ServeHTTP(w, r.WithContext(ContextWithClaims(r.Context(), claims)))
		})
	}
}

// bearerToken extracts the token of an "Authorization: Bearer <token>"
// header; reason is non-empty when there is none.
func bearerToken(r *http.Request) (token, reason string) {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	if h == "" {
		return "", "no authorization header"
	}
	scheme, rest, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", "authorization scheme is not Bearer"
	}
	token = strings.TrimSpace(rest)
	if token == "" || strings.ContainsAny(token, " \t") {
		return "", "malformed bearer token"
	}
	return token, ""
}

// discoverJWKSURL reads jwks_uri from the issuer's OpenID configuration.
func discoverJWKSURL(ctx context.Context, client *http.Client, issuer string) (string, error) {
	u := strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
	ctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", fmt.Errorf("auth: OIDC discovery %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("auth: OIDC discovery %s: %w", u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("auth: OIDC discovery %s: status %d", u, resp.StatusCode)
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxDiscoveryBytes)).Decode(&doc); err != nil {
		return "", fmt.Errorf("auth: OIDC discovery %s: %w", u, err)
	}
	if doc.Issuer != issuer {
		return "", fmt.Errorf("auth: OIDC discovery %s: issuer %q does not match configured %q", u, doc.Issuer, issuer)
	}
	if doc.JWKSURI == "" {
		return "", fmt.Errorf("auth: OIDC discovery %s: no jwks_uri", u)
	}
	return doc.JWKSURI, nil
}
