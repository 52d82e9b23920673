package clientkit

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Tokens hands out OAuth2 tokens (client-credentials or password grant), caching the current one until it expires or the
// server rejects it. It is safe for concurrent use.
type Tokens struct {
	source oauth2.TokenSource // fetches a new token

	mu     sync.Mutex
	cached oauth2.TokenSource // caches the current token; replaced when the server rejects it
}

// NewTokens returns tokens fetched from tokenURL with the client credentials in the Authorization
// header and the given scopes, if any. Token requests go through httpc, whose timeout bounds them.
func NewTokens(httpc *http.Client, tokenURL, clientID, clientSecret string, scopes ...string) *Tokens {
	cc := &clientcredentials.Config{
		ClientID:     clientID,
		ClientSecret: clientSecret,
		TokenURL:     tokenURL,
		Scopes:       scopes,
		AuthStyle:    oauth2.AuthStyleInHeader,
	}
	// The token source outlives any one call; its requests are bounded by httpc's timeout.
	tokenCtx := context.WithValue(context.Background(), oauth2.HTTPClient, httpc)
	return newTokens(fetcher(func() (*oauth2.Token, error) { return cc.Token(tokenCtx) }))
}

// NewPasswordTokens returns tokens fetched with the OAuth2 resource owner password grant: the
// client credentials in the Authorization header (the secret may be empty) and username and
// password in the form, as the original broker's AVS client fetched them.
func NewPasswordTokens(httpc *http.Client, tokenURL, clientID, clientSecret, username, password string, scopes ...string) *Tokens {
	cfg := &oauth2.Config{
		ClientID:     clientID,
		ClientSecret: clientSecret,
		Endpoint:     oauth2.Endpoint{TokenURL: tokenURL, AuthStyle: oauth2.AuthStyleInHeader},
		Scopes:       scopes,
	}
	tokenCtx := context.WithValue(context.Background(), oauth2.HTTPClient, httpc)
	return newTokens(fetcher(func() (*oauth2.Token, error) { return cfg.PasswordCredentialsToken(tokenCtx, username, password) }))
}

func newTokens(source oauth2.TokenSource) *Tokens {
	return &Tokens{source: source, cached: oauth2.ReuseTokenSource(nil, source)}
}

// fetcher fetches a new token on every call; clientcredentials.Config.TokenSource would cache it.
type fetcher func() (*oauth2.Token, error)

func (f fetcher) Token() (*oauth2.Token, error) { return f() }

// Token returns a valid access token, fetching one if needed, without waiting past ctx.
func (t *Tokens) Token(ctx context.Context) (*oauth2.Token, error) {
	type result struct {
		tok *oauth2.Token
		err error
	}
	t.mu.Lock()
	ts := t.cached
	t.mu.Unlock()
	ch := make(chan result, 1)
	go func() {
		tok, err := ts.Token()
		ch <- result{tok, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("obtaining OAuth token: %w", r.err)
		}
		return r.tok, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("obtaining OAuth token: %w", ctx.Err())
	}
}

// drop forgets the cached token, so that the next call fetches a new one.
func (t *Tokens) drop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cached = oauth2.ReuseTokenSource(nil, t.source)
}

// Authorized runs call with a valid token. When the server answers 401 to a token it still
// considers valid (the server restarted, the token was revoked), it fetches a new token and runs
// call once more.
func (t *Tokens) Authorized(ctx context.Context, call func(*oauth2.Token) error) error {
	for try := 1; ; try++ {
		tok, err := t.Token(ctx)
		if err != nil {
			return err
		}
		err = call(tok)
		if try == 1 && StatusOf(err) == http.StatusUnauthorized {
			t.drop()
			continue
		}
		return err
	}
}
