package eventhubs

import (
	"context"
	"fmt"
	"net/http"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// tokens hands out Microsoft Entra ID client-credentials tokens for ARM. clientkit.Tokens cannot ask
// for a scope, which Entra ID requires, hence this small twin. It caches the current token until it
// expires or ARM rejects it, and is safe for concurrent use.
type tokens struct {
	cc    *clientcredentials.Config
	httpc *http.Client
	// lock guards cached; a channel so that waiting for a token fetched by another call honours ctx.
	lock   chan struct{}
	cached *oauth2.Token
}

func newTokens(httpc *http.Client, tokenURL, clientID, clientSecret, scope string) *tokens {
	return &tokens{
		cc: &clientcredentials.Config{
			ClientID:     clientID,
			ClientSecret: clientSecret,
			TokenURL:     tokenURL,
			Scopes:       []string{scope},
			// Entra ID documents the credentials in the form (client_secret_post) first.
			AuthStyle: oauth2.AuthStyleInParams,
		},
		httpc: httpc,
		lock:  make(chan struct{}, 1),
	}
}

// token returns a valid token, fetching one when needed; a fetch is bounded by ctx and the HTTP timeout.
func (t *tokens) token(ctx context.Context) (*oauth2.Token, error) {
	select {
	case t.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("obtaining Azure token: %w", ctx.Err())
	}
	defer func() { <-t.lock }()
	if t.cached.Valid() {
		return t.cached, nil
	}
	tok, err := t.cc.Token(context.WithValue(ctx, oauth2.HTTPClient, t.httpc))
	if err != nil {
		return nil, fmt.Errorf("obtaining Azure token: %w", err)
	}
	t.cached = tok
	return tok, nil
}

// drop forgets tok unless another call has replaced it already.
func (t *tokens) drop(ctx context.Context, tok *oauth2.Token) {
	select {
	case t.lock <- struct{}{}:
	case <-ctx.Done():
		return
	}
	if t.cached == tok {
		t.cached = nil
	}
	<-t.lock
}

// authorized runs call with a valid token. When ARM answers 401 to a token that looks valid (revoked,
// clock skew), it fetches a new token and runs call once more.
func (t *tokens) authorized(ctx context.Context, call func(*oauth2.Token) error) error {
	for try := 1; ; try++ {
		tok, err := t.token(ctx)
		if err != nil {
			return err
		}
		err = call(tok)
		if try == 1 && clientkit.StatusOf(err) == http.StatusUnauthorized {
			t.drop(ctx, tok)
			continue
		}
		return err
	}
}
