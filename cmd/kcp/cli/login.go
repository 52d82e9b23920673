package cli

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/oauth2"

	"github.com/kyma-project/kyma-environment-broker/internal/broker/auth"
)

// OIDC login, as KEB's own kcp does it (kyma-project/control-plane tools/cli, on int128/kubelogin):
// the same global settings (--oidc-issuer-url, --oidc-client-id, --oidc-client-secret and their
// KCP_OIDC_* variables), the browser flow on a loopback redirect (127.0.0.1:8000, else :18000,
// redirect host localhost) and the scopes openid and email; plus the device flow (RFC 8628) for
// machines without a browser. The ID token is what the broker verifies (its aud is the client ID,
// APP_BROKER_OIDC_AUDIENCE); it is cached with the refresh token and refreshed before it expires.

const (
	grantAuthCode   = "authcode"
	grantDeviceCode = "device-code"
	// refreshMargin: a token that expires sooner than this is refreshed first, so it does not
	// expire on its way to the broker.
	refreshMargin = 30 * time.Second
	oidcTimeout   = 30 * time.Second
)

// defaultListenAddresses are where the browser flow's redirect is received (the first free).
var defaultListenAddresses = []string{"127.0.0.1:8000", "127.0.0.1:18000"}

// oidcSettings say which issuer and client kcp logs in with.
type oidcSettings struct {
	IssuerURL, ClientID, ClientSecret string
}

func (s oidcSettings) enabled() bool { return s.IssuerURL != "" }

// addOIDCFlags registers the global OIDC flags (every command needs them to find and refresh the
// cached login).
func (a *app) addOIDCFlags(f *pflag.FlagSet) {
	f.StringVar(&a.flags.OIDCIssuerURL, "oidc-issuer-url", "", "OIDC issuer to log in with (kcp login) ($KCP_OIDC_ISSUER_URL)")
	f.StringVar(&a.flags.OIDCClientID, "oidc-client-id", "", "OIDC client ID; the broker's APP_BROKER_OIDC_AUDIENCE ($KCP_OIDC_CLIENT_ID)")
	f.StringVar(&a.flags.OIDCClientSecret, "oidc-client-secret", "", "OIDC client secret, for a confidential client ($KCP_OIDC_CLIENT_SECRET)")
}

// oidc resolves the OIDC settings from flags, KCP_OIDC_* and the config file.
func (a *app) oidc(file Config) (oidcSettings, error) {
	s := oidcSettings{
		IssuerURL:    a.pick(a.flags.OIDCIssuerURL, "KCP_OIDC_ISSUER_URL", file.OIDCIssuerURL),
		ClientID:     a.pick(a.flags.OIDCClientID, "KCP_OIDC_CLIENT_ID", file.OIDCClientID),
		ClientSecret: a.pick(a.flags.OIDCClientSecret, "KCP_OIDC_CLIENT_SECRET", file.OIDCClientSecret),
	}
	s.IssuerURL = strings.TrimRight(s.IssuerURL, "/")
	if !s.enabled() {
		return s, nil
	}
	if u, err := url.Parse(s.IssuerURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return s, usagef("--oidc-issuer-url: must be an http(s) URL, got %q", s.IssuerURL)
	}
	if s.ClientID == "" {
		return s, usagef("no OIDC client ID: set --oidc-client-id, KCP_OIDC_CLIENT_ID or oidc-client-id in the config file")
	}
	return s, nil
}

func (a *app) pick(flag, env, fromFile string) string {
	if flag != "" {
		return flag
	}
	if v := a.io.Getenv(env); v != "" {
		return v
	}
	return fromFile
}

// tokenCacheDir is where logins are cached: the user's config directory ($XDG_CONFIG_HOME or the
// platform's), under kcp/oidc.
func (a *app) tokenCacheDir() (string, error) {
	base := a.io.Getenv("XDG_CONFIG_HOME")
	if base == "" {
		var err error
		if base, err = os.UserConfigDir(); err != nil {
			return "", fmt.Errorf("finding the user's config directory for the login cache: %w", err)
		}
	}
	return filepath.Join(base, "kcp", "oidc"), nil
}

// newLogin is the cached login of s.
func (a *app) newLogin(s oidcSettings) (*login, error) {
	dir, err := a.tokenCacheDir()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(s.IssuerURL + "\x00" + s.ClientID))
	return &login{
		settings: s,
		path:     filepath.Join(dir, hex.EncodeToString(sum[:12])+".json"),
		http:     &http.Client{Timeout: oidcTimeout},
	}, nil
}

func (a *app) loginCmd() *cobra.Command {
	var (
		grant        string
		listen       []string
		skipBrowser  bool
		extraScopes  []string
		authTimeout  time.Duration
		printIDToken bool
	)
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Log in with OIDC (browser or device flow); later commands send the cached, refreshed ID token",
		Long: `Log in to the OIDC issuer (--oidc-issuer-url, --oidc-client-id, --oidc-client-secret; or KCP_OIDC_ISSUER_URL,
KCP_OIDC_CLIENT_ID, KCP_OIDC_CLIENT_SECRET; or oidc-issuer-url, oidc-client-id, oidc-client-secret in the config
file) and cache the ID token with its refresh token in the user's config directory (kcp/oidc, mode 0600).
Every later command with the same issuer and client sends the ID token as a bearer token and refreshes it
when it expires; when the issuer refuses the refresh, run kcp login again.

--grant-type authcode (default): open http://localhost:PORT/ (the first free of --listen-address; the client
must allow the redirect URL http://localhost:PORT/) and log in; PKCE (S256) protects the code.
--grant-type device-code: open the printed URL on any device and enter the code (RFC 8628).`,
		Annotations: map[string]string{"offline": "true"}, // needs the issuer, not the broker
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			file, err := a.configFile()
			if err != nil {
				return err
			}
			s, err := a.oidc(file)
			if err != nil {
				return err
			}
			if !s.enabled() {
				return usagef("no OIDC issuer: set --oidc-issuer-url, KCP_OIDC_ISSUER_URL or oidc-issuer-url in the config file")
			}
			if grant != grantAuthCode && grant != grantDeviceCode {
				return usagef("--grant-type: must be %s or %s, got %q", grantAuthCode, grantDeviceCode, grant)
			}
			l, err := a.newLogin(s)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			p, err := l.discover(ctx)
			if err != nil {
				return err
			}
			scopes := append([]string{"openid", "offline_access"}, extraScopes...)
			var tok *cachedToken
			if grant == grantDeviceCode {
				tok, err = l.deviceFlow(ctx, p, scopes, a.io.Err)
			} else {
				tok, err = l.authCodeFlow(ctx, p, scopes, listen, !skipBrowser, authTimeout, a.io.Err)
			}
			if err != nil {
				return err
			}
			if err := l.store(tok); err != nil {
				return err
			}
			if printIDToken {
				fmt.Fprintln(a.io.Out, tok.IDToken)
				return nil
			}
			who := tok.Subject
			if tok.Email != "" {
				who = tok.Email
			}
			fmt.Fprintf(a.io.Out, "Logged in to %s as %s; the ID token is valid until %s and refreshed after (cached in %s)\n",
				s.IssuerURL, who, tok.Expiry.UTC().Format(time.RFC3339), l.path)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&grant, "grant-type", grantAuthCode, "authcode (browser, PKCE) or device-code (RFC 8628)")
	f.StringSliceVar(&listen, "listen-address", defaultListenAddresses, "where the browser flow receives the redirect (the first free one)")
	f.BoolVar(&skipBrowser, "skip-open-browser", false, "print the URL to open instead of opening a browser")
	f.StringSliceVar(&extraScopes, "oidc-extra-scope", []string{"email"}, "scopes requested besides openid and offline_access")
	f.DurationVar(&authTimeout, "authentication-timeout", 180*time.Second, "how long to wait for the login in the browser")
	f.BoolVar(&printIDToken, "print-id-token", false, "print the ID token on standard output (e.g. for curl) instead of the summary")
	return cmd
}

// login is one issuer's and client's cached login.
type login struct {
	settings oidcSettings
	path     string
	http     *http.Client

	mu  sync.Mutex
	cur *cachedToken
}

// cachedToken is the login cache file's content.
type cachedToken struct {
	Issuer       string    `json:"issuer"`
	ClientID     string    `json:"client_id"`
	IDToken      string    `json:"id_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry"`
	Subject      string    `json:"subject,omitempty"`
	Email        string    `json:"email,omitempty"`
}

// provider is what kcp reads of the issuer's discovery document.
type provider struct {
	Issuer                      string `json:"issuer"`
	AuthorizationEndpoint       string `json:"authorization_endpoint"`
	TokenEndpoint               string `json:"token_endpoint"`
	DeviceAuthorizationEndpoint string `json:"device_authorization_endpoint"`
	JWKSURI                     string `json:"jwks_uri"`
}

func (l *login) ctx(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, l.http)
}

// discover reads <issuer>/.well-known/openid-configuration.
func (l *login) discover(ctx context.Context) (provider, error) {
	where := l.settings.IssuerURL + "/.well-known/openid-configuration"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, where, nil)
	if err != nil {
		return provider{}, fmt.Errorf("reading the OIDC discovery document: %w", err)
	}
	resp, err := l.http.Do(req)
	if err != nil {
		return provider{}, fmt.Errorf("reading the OIDC discovery document of %s (is the issuer URL right and reachable?): %w", l.settings.IssuerURL, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return provider{}, fmt.Errorf("reading the OIDC discovery document %s: %w", where, err)
	}
	if resp.StatusCode != http.StatusOK {
		return provider{}, fmt.Errorf("reading the OIDC discovery document %s: %s (is --oidc-issuer-url the issuer?)", where, resp.Status)
	}
	var p provider
	if err := json.Unmarshal(raw, &p); err != nil {
		return provider{}, fmt.Errorf("decoding the OIDC discovery document %s: %w", where, err)
	}
	if strings.TrimRight(p.Issuer, "/") != l.settings.IssuerURL {
		return provider{}, fmt.Errorf("the OIDC discovery document %s names the issuer %q, not %q: set --oidc-issuer-url to the issuer its tokens carry", where, p.Issuer, l.settings.IssuerURL)
	}
	if p.TokenEndpoint == "" || p.JWKSURI == "" {
		return provider{}, fmt.Errorf("the OIDC discovery document %s has no token_endpoint or jwks_uri", where)
	}
	return p, nil
}

func (l *login) oauth2(p provider, scopes []string, redirect string) *oauth2.Config {
	return &oauth2.Config{
		ClientID:     l.settings.ClientID,
		ClientSecret: l.settings.ClientSecret,
		Endpoint: oauth2.Endpoint{
			AuthURL: p.AuthorizationEndpoint, TokenURL: p.TokenEndpoint, DeviceAuthURL: p.DeviceAuthorizationEndpoint,
		},
		RedirectURL: redirect,
		Scopes:      scopes,
	}
}

// deviceFlow runs RFC 8628: the user opens the verification URL anywhere and enters the code.
func (l *login) deviceFlow(ctx context.Context, p provider, scopes []string, prompt io.Writer) (*cachedToken, error) {
	if p.DeviceAuthorizationEndpoint == "" {
		return nil, fmt.Errorf("the issuer %s offers no device flow (no device_authorization_endpoint): use --grant-type %s", l.settings.IssuerURL, grantAuthCode)
	}
	conf := l.oauth2(p, scopes, "")
	da, err := conf.DeviceAuth(l.ctx(ctx))
	if err != nil {
		return nil, fmt.Errorf("starting the device login at %s: %w", p.DeviceAuthorizationEndpoint, err)
	}
	if da.VerificationURIComplete != "" {
		fmt.Fprintf(prompt, "To log in, open %s\n(or open %s and enter the code %s)\n", da.VerificationURIComplete, da.VerificationURI, da.UserCode)
	} else {
		fmt.Fprintf(prompt, "To log in, open %s and enter the code %s\n", da.VerificationURI, da.UserCode)
	}
	tok, err := conf.DeviceAccessToken(l.ctx(ctx), da)
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			switch re.ErrorCode {
			case "access_denied":
				return nil, fmt.Errorf("the device login was denied at the issuer: %w", err)
			case "expired_token":
				return nil, fmt.Errorf("the device code expired before the login was approved: run kcp login again: %w", err)
			}
		}
		return nil, fmt.Errorf("waiting for the device login: %w", err)
	}
	return l.accept(ctx, p, tok, "", "")
}

// authCodeFlow runs the authorization code flow with PKCE and a loopback redirect.
func (l *login) authCodeFlow(ctx context.Context, p provider, scopes, listen []string, openBrowser bool, timeout time.Duration, prompt io.Writer) (*cachedToken, error) {
	if p.AuthorizationEndpoint == "" {
		return nil, fmt.Errorf("the issuer %s has no authorization_endpoint: use --grant-type %s", l.settings.IssuerURL, grantDeviceCode)
	}
	var ln net.Listener
	var errs []string
	for _, addr := range listen {
		var err error
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		errs = append(errs, err.Error())
	}
	if ln == nil {
		return nil, fmt.Errorf("no --listen-address is free for the login's redirect: %s", strings.Join(errs, "; "))
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	local := "http://localhost:" + port + "/"
	conf := l.oauth2(p, scopes, local)
	state, nonce, verifier := randomString(), randomString(), oauth2.GenerateVerifier()
	authURL := conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("nonce", nonce))

	type result struct {
		code string
		err  error
	}
	done := make(chan result, 1)
	var once sync.Once
	finish := func(r result) { once.Do(func() { done <- r }) }
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		switch {
		case q.Get("error") != "":
			http.Error(w, "Login failed: "+q.Get("error")+" "+q.Get("error_description"), http.StatusBadRequest)
			finish(result{err: fmt.Errorf("the issuer refused the login: %s %s", q.Get("error"), q.Get("error_description"))})
		case q.Get("code") != "":
			if q.Get("state") != state {
				// Not our login (a stale tab or a forged redirect): keep waiting for ours.
				http.Error(w, "Login failed: the state does not match; start again from "+local, http.StatusBadRequest)
				return
			}
			fmt.Fprintln(w, "Logged in to kcp: you can close this window.")
			finish(result{code: q.Get("code")})
		default:
			http.Redirect(w, r, authURL, http.StatusFound)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()

	fmt.Fprintf(prompt, "To log in, open %s in a browser\n", local)
	if openBrowser {
		browse(local)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(timeout):
		return nil, fmt.Errorf("no login in the browser within %s (--authentication-timeout)", timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if r.err != nil {
		return nil, r.err
	}
	tok, err := conf.Exchange(l.ctx(ctx), r.code, oauth2.VerifierOption(verifier))
	if err != nil {
		return nil, fmt.Errorf("exchanging the authorization code at %s: %w", p.TokenEndpoint, err)
	}
	return l.accept(ctx, p, tok, nonce, "")
}

// accept verifies the ID token of a token answer (signature, issuer, audience = client ID,
// expiry, and the nonce when one was sent) and makes it the cached login.
func (l *login) accept(ctx context.Context, p provider, tok *oauth2.Token, nonce, oldRefresh string) (*cachedToken, error) {
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, fmt.Errorf("the issuer's token answer has no id_token (is the scope openid allowed for client %s?)", l.settings.ClientID)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	vctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the verifier's background key refresh
	v, err := auth.NewVerifier(vctx, auth.Config{OIDCIssuer: l.settings.IssuerURL, OIDCAudience: l.settings.ClientID, OIDCJWKSURL: p.JWKSURI}, l.http, auth.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("preparing to verify the ID token: %w", err)
	}
	claims, err := v.Verify(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("the issuer's ID token does not verify (issuer %s, audience %s = the client ID, keys %s; its aud is %v): %w",
			l.settings.IssuerURL, l.settings.ClientID, p.JWKSURI, peek(raw)["aud"], err)
	}
	if nonce != "" && peek(raw)["nonce"] != nonce {
		return nil, errors.New("the issuer's ID token carries another nonce than this login's: log in again")
	}
	refresh := tok.RefreshToken
	if refresh == "" {
		refresh = oldRefresh // issuers may keep the refresh token without rotating it
	}
	return &cachedToken{
		Issuer: l.settings.IssuerURL, ClientID: l.settings.ClientID, IDToken: raw, RefreshToken: refresh,
		Expiry: claims.ExpiresAt, Subject: claims.Subject, Email: claims.Email,
	}, nil
}

// peek decodes a JWT's payload without verifying it (for messages only).
func peek(raw string) map[string]any {
	parts := strings.Split(raw, ".")
	out := map[string]any{}
	if len(parts) != 3 {
		return out
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err == nil {
		_ = json.Unmarshal(b, &out)
	}
	return out
}

// load reads the cached login; nil when there is none.
func (l *login) load() (*cachedToken, error) {
	raw, err := os.ReadFile(l.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the cached login: %w", err)
	}
	var t cachedToken
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("reading the cached login %s (delete it and run kcp login): %w", l.path, err)
	}
	return &t, nil
}

// exists reports whether a login is cached.
func (l *login) exists() bool {
	_, err := os.Stat(l.path)
	return err == nil
}

// store writes the login with mode 0600 (a directory 0700), replacing the file in one step so a
// concurrent kcp never reads half of it.
func (l *login) store(t *cachedToken) error {
	dir := filepath.Dir(l.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the login cache directory: %w", err)
	}
	raw, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the login: %w", err)
	}
	f, err := os.CreateTemp(dir, ".login-*")
	if err != nil {
		return fmt.Errorf("writing the login cache: %w", err)
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("writing the login cache: %w", err)
	}
	if _, err := f.Write(raw); err != nil {
		f.Close()
		return fmt.Errorf("writing the login cache: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing the login cache: %w", err)
	}
	if err := os.Rename(f.Name(), l.path); err != nil {
		return fmt.Errorf("writing the login cache: %w", err)
	}
	l.cur = t
	return nil
}

// token is the ID token to send, refreshed first when it expires within refreshMargin.
func (l *login) token(ctx context.Context) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == nil {
		t, err := l.load()
		if err != nil {
			return "", err
		}
		if t == nil {
			return "", fmt.Errorf("not logged in to %s: run kcp login", l.settings.IssuerURL)
		}
		l.cur = t
	}
	if time.Until(l.cur.Expiry) > refreshMargin {
		return l.cur.IDToken, nil
	}
	if l.cur.RefreshToken == "" {
		return "", fmt.Errorf("the login to %s expired at %s and the issuer gave no refresh token: run kcp login again",
			l.settings.IssuerURL, l.cur.Expiry.UTC().Format(time.RFC3339))
	}
	t, err := l.refresh(ctx, l.cur.RefreshToken)
	if err != nil {
		// Another kcp may have refreshed (and so used up a rotating refresh token) meanwhile.
		if other, lerr := l.load(); lerr == nil && other != nil && other.IDToken != l.cur.IDToken && time.Until(other.Expiry) > refreshMargin {
			l.cur = other
			return other.IDToken, nil
		}
		return "", err
	}
	if err := l.store(t); err != nil {
		return "", err
	}
	return t.IDToken, nil
}

func (l *login) refresh(ctx context.Context, refreshToken string) (*cachedToken, error) {
	p, err := l.discover(ctx)
	if err != nil {
		return nil, fmt.Errorf("refreshing the expired login: %w", err)
	}
	conf := l.oauth2(p, nil, "")
	tok, err := conf.TokenSource(l.ctx(ctx), &oauth2.Token{RefreshToken: refreshToken, Expiry: time.Now().Add(-time.Hour)}).Token()
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode == "invalid_grant" {
			return nil, fmt.Errorf("the login to %s expired and the issuer refused to refresh it (invalid_grant: the session was revoked or has ended): run kcp login again", l.settings.IssuerURL)
		}
		return nil, fmt.Errorf("refreshing the expired login at %s (run kcp login again if this persists): %w", p.TokenEndpoint, err)
	}
	return l.accept(ctx, p, tok, "", refreshToken)
}

func randomString() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// browse opens url in the desktop's browser, if there is one (best effort: the URL is printed too).
func browse(url string) {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", url)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	default:
		cmd = exec.Command("xdg-open", url)
	}
	if cmd.Start() == nil {
		go func() { _ = cmd.Wait() }()
	}
}
