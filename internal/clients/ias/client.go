// Package ias is the client of SAP's Identity Authentication Service (IAS) service provider API: it
// registers the service provider of a runtime, makes it an OpenID Connect application, generates its
// client secret and deregisters it. Calls authenticate with basic auth, are retried with backoff on
// transient failures only (network errors, 429, 5xx) a few times within a call's budget (clientkit.Calls), and are
// idempotent where IAS allows: creation first looks for a service provider of the same name, deletion
// of a missing service provider or of its secrets succeeds, configuration sets absolute values.
package ias

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
)

const serviceProvidersPath = "/service/sps"

// SSO types of a service provider.
const (
	SSOTypeOpenIDConnect = "openIdConnect"
	SSOTypeSAML2         = "saml2"
)

// SubjectNameIdentifier is the subject name identifier ConfigureOIDC sets: users are identified by e-mail.
const SubjectNameIdentifier = "mail"

// AssertionAttribute maps a user attribute to the name it has in assertions and tokens.
type AssertionAttribute struct {
	AssertionAttributeName string `json:"assertion_attribute_name"`
	UserAttributeName      string `json:"user_attribute_name"`
}

// AssertionAttributes are the attributes ConfigureOIDC puts into tokens.
var AssertionAttributes = []AssertionAttribute{
	{AssertionAttributeName: "first_name", UserAttributeName: "firstName"},
	{AssertionAttributeName: "last_name", UserAttributeName: "lastName"},
	{AssertionAttributeName: "email", UserAttributeName: "mail"},
	{AssertionAttributeName: "groups", UserAttributeName: "companyGroups"},
}

// OIDCConfiguration is the OpenID Connect configuration of a service provider.
type OIDCConfiguration struct {
	PostLogoutRedirectURIs []string `json:"post_logout_redirect_uris"`
}

// ServiceProvider is a service provider (an application) as IAS returns it. Its OpenID Connect
// client id is its id.
type ServiceProvider struct {
	ID                         string               `json:"id"`
	Name                       string               `json:"sp_name"`
	SSOType                    string               `json:"sso_type"`
	OpenIDConnectConfiguration OIDCConfiguration    `json:"openid_connect_configuration"`
	RedirectURIs               []string             `json:"redirect_uris"`
	SubjectNameIdentifier      string               `json:"subject_name_identifier"`
	AssertionAttributes        []AssertionAttribute `json:"assertion_attributes"`
	DefaultAuthenticatingIDP   string               `json:"default_authenticating_idp"`
	// Created is true when CreateServiceProvider created it (it then has no client secret) and
	// false when it found one of the name.
	Created bool `json:"-"`
}

type searchResult struct {
	ServiceProviders []ServiceProvider `json:"service_providers"`
}

type createRequest struct {
	Name string `json:"sp_name"`
}

type updateRequest struct {
	ID           string   `json:"id"`
	SSOType      string   `json:"sso_type"`
	RedirectURIs []string `json:"redirect_uris"`
}

type rbaRequest struct {
	SubjectNameIdentifier    string               `json:"subject_name_identifier"`
	AssertionAttributes      []AssertionAttribute `json:"assertion_attributes"`
	DefaultAuthenticatingIDP string               `json:"default_authenticating_idp,omitempty"`
}

type secretResponse struct {
	ClientID     string `json:"clientid"`
	ClientSecret string `json:"clientsecret"`
}

// Client calls the IAS service provider API. It is safe for concurrent use.
type Client struct {
	cfg    Config
	caller *clientkit.Caller
	base   string
	http   *http.Client
}

// New returns a client for cfg; zero Timeout and backoff settings take their defaults. It returns
// ErrDisabled when cfg disables IAS.
func New(cfg Config) (*Client, error) {
	if cfg.Disabled {
		return nil, ErrDisabled
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("IAS configuration: %w", err)
	}
	cfg.withDefaults()
	return &Client{
		cfg:    cfg,
		caller: newCaller(cfg),
		base:   strings.TrimRight(cfg.URL, "/") + serviceProvidersPath,
		http:   clientkit.NewHTTPClient(cfg.Timeout, cfg.Metrics.Transport("ias", cfg.Transport)),
	}, nil
}

// Config returns the configuration in use, defaults applied.
func (c *Client) Config() Config { return c.cfg }

// CreateServiceProvider creates a service provider of the given name unless one exists, in which case
// it returns that one (the oldest, if IAS holds several) as IAS lists it. Each attempt looks the name
// up before creating, so a retry after a lost response does not create a duplicate. Two concurrent
// callers creating the same name can still race; the broker creates a given name from one operation
// only. A created one is returned as the creation's answer tells it (ID and name, Created set):
// callers need its ID, so it is not read back.
func (c *Client) CreateServiceProvider(ctx context.Context, name string) (*ServiceProvider, error) {
	op := fmt.Sprintf("creating IAS service provider %q", name)
	if strings.TrimSpace(name) == "" {
		return nil, &Error{Op: op, Err: errors.New("the service provider name is empty")}
	}
	var out *ServiceProvider
	err := c.retry(ctx, op, func(ctx context.Context) error {
		found, err := c.find(ctx, name)
		if err != nil {
			return fmt.Errorf("looking up by name: %w", err)
		}
		if found != nil {
			out = found
			return nil
		}
		resp, err := c.do(ctx, http.MethodPost, "", nil, createRequest{Name: name}, nil)
		if err != nil {
			return err
		}
		id, err := idFromLocation(resp.Header.Get("Location"))
		if err != nil {
			return err
		}
		out = &ServiceProvider{ID: id, Name: name, Created: true}
		return nil
	})
	return out, err
}

// idFromLocation takes the id from the Location header of a creation, /service/sps/<id>.
func idFromLocation(loc string) (string, error) {
	u, err := url.Parse(loc)
	if err != nil || !strings.Contains(u.Path, serviceProvidersPath+"/") {
		return "", clientkit.Permanent(fmt.Errorf("unexpected Location %q in the creation response", loc))
	}
	id, err := url.PathUnescape(path.Base(u.Path))
	if err != nil || id == "" || id == "." || id == "/" {
		return "", clientkit.Permanent(fmt.Errorf("no service provider id in Location %q", loc))
	}
	return id, nil
}

// FindServiceProvider returns the oldest service provider with the given name; found is false when
// there is none.
func (c *Client) FindServiceProvider(ctx context.Context, name string) (sp *ServiceProvider, found bool, err error) {
	err = c.retry(ctx, fmt.Sprintf("looking up IAS service provider %q", name), func(ctx context.Context) error {
		var err error
		sp, err = c.find(ctx, name)
		return err
	})
	return sp, sp != nil, err
}

// find returns the first service provider of the list IAS returns (in creation order) with exactly
// the given name.
func (c *Client) find(ctx context.Context, name string) (*ServiceProvider, error) {
	var res searchResult
	if _, err := c.do(ctx, http.MethodGet, "", url.Values{"sp_name": {name}}, nil, &res); err != nil {
		return nil, err
	}
	for i := range res.ServiceProviders {
		if res.ServiceProviders[i].Name == name {
			return &res.ServiceProviders[i], nil
		}
	}
	return nil, nil
}

// GetServiceProvider returns the service provider; a missing one is a permanent error for which
// IsNotFound is true.
func (c *Client) GetServiceProvider(ctx context.Context, id string) (*ServiceProvider, error) {
	op := fmt.Sprintf("getting IAS service provider %q", id)
	if err := checkID(op, id); err != nil {
		return nil, err
	}
	var out ServiceProvider
	err := c.retry(ctx, op, func(ctx context.Context) error {
		_, err := c.do(ctx, http.MethodGet, "/"+url.PathEscape(id), nil, nil, &out)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ConfigureOIDC makes the service provider an OpenID Connect application with exactly the given
// redirect URIs, then sets its authentication: users identified by e-mail (SubjectNameIdentifier),
// the AssertionAttributes in tokens and, when configured, the default identity provider. Both calls
// set absolute values, so repeating ConfigureOIDC is harmless. It returns the service provider as
// configured.
func (c *Client) ConfigureOIDC(ctx context.Context, id string, redirectURIs []string) (*ServiceProvider, error) {
	// One budget for all the calls this takes.
	ctx, cancel := c.caller.Bound(ctx)
	defer cancel()
	op := fmt.Sprintf("configuring OpenID Connect for IAS service provider %q", id)
	if err := checkID(op, id); err != nil {
		return nil, err
	}
	update := updateRequest{ID: id, SSOType: SSOTypeOpenIDConnect, RedirectURIs: append([]string{}, redirectURIs...)}
	err := c.retry(ctx, op, func(ctx context.Context) error {
		_, err := c.do(ctx, http.MethodPut, "", nil, update, nil)
		return err
	})
	if err != nil {
		return nil, err
	}
	rba := rbaRequest{SubjectNameIdentifier: SubjectNameIdentifier, AssertionAttributes: AssertionAttributes,
		DefaultAuthenticatingIDP: c.cfg.IdentityProvider}
	var out ServiceProvider
	err = c.retry(ctx, fmt.Sprintf("setting the authentication of IAS service provider %q", id), func(ctx context.Context) error {
		_, err := c.do(ctx, http.MethodPost, "/"+url.PathEscape(id)+"/rba", nil, rba, &out)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// GenerateSecret replaces the service provider's client secrets with a new one and returns it with
// the OpenID Connect client id. Every attempt first deletes all the secrets the service provider
// has, so exactly one valid secret exists however often this runs: after a crash before the caller
// kept the secret, or an answer lost on the way (a secret generated that nobody knows).
func (c *Client) GenerateSecret(ctx context.Context, id string) (clientID, clientSecret string, err error) {
	return c.generateSecret(ctx, id, true)
}

func (c *Client) generateSecret(ctx context.Context, id string, mayHaveSecrets bool) (clientID, clientSecret string, err error) {
	op := fmt.Sprintf("generating a client secret for IAS service provider %q", id)
	if err := checkID(op, id); err != nil {
		return "", "", err
	}
	var out secretResponse
	err = c.retry(ctx, op, func(ctx context.Context) error {
		if mayHaveSecrets {
			if _, err := c.do(ctx, http.MethodDelete, c.secretsPath(id), nil, nil, nil); err != nil {
				return fmt.Errorf("deleting earlier secrets: %w", err)
			}
		}
		// An attempt that fails may have generated a secret whose answer was lost.
		mayHaveSecrets = true
		if _, err := c.do(ctx, http.MethodPost, c.secretsPath(id), nil, nil, &out); err != nil {
			return err
		}
		if out.ClientID == "" || out.ClientSecret == "" {
			return clientkit.Permanent(errors.New("the response lacks clientid or clientsecret"))
		}
		return nil
	})
	if err != nil {
		return "", "", err
	}
	return out.ClientID, out.ClientSecret, nil
}

// GenerateFirstSecret generates the first client secret of a service provider that
// CreateServiceProvider has just created (Created): it has none, so the first attempt sends no
// deletion. Should an attempt's answer be lost, the next ones delete first, as GenerateSecret does,
// so that exactly one valid secret exists. For any other service provider use GenerateSecret.
func (c *Client) GenerateFirstSecret(ctx context.Context, id string) (clientID, clientSecret string, err error) {
	return c.generateSecret(ctx, id, false)
}

func (c *Client) secretsPath(id string) string { return "/" + url.PathEscape(id) + "/client-secrets" }

// DeleteSecrets deletes every client secret of the service provider; a missing service provider
// counts as done.
func (c *Client) DeleteSecrets(ctx context.Context, id string) error {
	op := fmt.Sprintf("deleting the client secrets of IAS service provider %q", id)
	if err := checkID(op, id); err != nil {
		return err
	}
	return c.retry(ctx, op, func(ctx context.Context) error {
		_, err := c.do(ctx, http.MethodDelete, c.secretsPath(id), nil, nil, nil)
		return clientkit.IgnoreNotFound(err)
	})
}

// DeleteServiceProvider deletes the service provider; deleting a missing one succeeds.
func (c *Client) DeleteServiceProvider(ctx context.Context, id string) error {
	op := fmt.Sprintf("deleting IAS service provider %q", id)
	if err := checkID(op, id); err != nil {
		return err
	}
	return c.retry(ctx, op, func(ctx context.Context) error {
		_, err := c.do(ctx, http.MethodDelete, "/"+url.PathEscape(id), nil, nil, nil)
		return clientkit.IgnoreNotFound(err)
	})
}

func checkID(op, id string) error {
	if strings.TrimSpace(id) == "" {
		return &Error{Op: op, Err: errors.New("the service provider id is empty")}
	}
	return nil
}

// retry runs attempt until it succeeds, fails permanently, or has made its attempts within the
// call\'s budget, sleeping with jittered exponential backoff between attempts; while the system is
// down it fails at once.
func (c *Client) retry(ctx context.Context, op string, attempt func(context.Context) error) error {
	return c.caller.Retry(ctx, op, attempt)
}

// do makes one request with basic auth; in and out are JSON bodies, either may be nil. It returns
// the response, whose body is already read and closed, on a 2xx answer.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) (*http.Response, error) {
	return clientkit.DoJSON(ctx, c.http, c.authorize, method, c.base, path, query, in, out)
}

func (c *Client) authorize(req *http.Request) { req.SetBasicAuth(c.cfg.UserID, c.cfg.Password) }

func newCaller(cfg Config) *clientkit.Caller {
	return clientkit.NewCaller("ias", cfg.RetryInitialBackoff, cfg.RetryMaxBackoff, cfg.Calls, cfg.Metrics)
}
