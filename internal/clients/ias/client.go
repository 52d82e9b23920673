// Package ias is the client of SAP's Identity Authentication Service (IAS) service provider API as
// the original Kyma Environment Broker called it (testdata/contract.json): it registers the service
// provider of a runtime, makes it an OpenID Connect application, creates its client secret and
// deletes it. Calls authenticate with basic auth, are retried with backoff on transient failures only
// (network errors, 429, 5xx) a few times within a call's budget (clientkit.Calls), and are idempotent
// where IAS allows: creation first looks the display name up in the company's service providers,
// deletions of missing objects succeed, configuration sets absolute values. Creating a client
// secret is not idempotent in IAS: see GenerateSecret.
package ias

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/httpbody"
)

// Paths of the IAS API.
const (
	PathServiceProviders  = "/service/sps"
	PathCompanyGlobal     = "/service/company/global"
	PathDelete            = "/service/sps/delete"
	PathDeleteSecret      = "/service/sps/clientSecret"
	PathIdentityProviders = "/service/idp"
)

// Organization is the company service providers are created in (company_id) and configured for.
const Organization = "global"

// SSO types of a service provider.
const (
	SSOTypeOpenIDConnect = "openIdConnect"
	SSOTypeSAML2         = "saml2"
)

// SubjectNameIdentifier is the name_id_attribute ConfigureOIDC sets: users are identified by e-mail.
const SubjectNameIdentifier = "mail"

// AssertionAttribute maps a user attribute to the name it has in assertions and tokens.
type AssertionAttribute struct {
	AssertionAttribute string `json:"assertionAttribute"`
	UserAttribute      string `json:"userAttribute"`
}

// AssertionAttributes are the attributes ConfigureOIDC puts into tokens.
var AssertionAttributes = []AssertionAttribute{
	{AssertionAttribute: "first_name", UserAttribute: "firstName"},
	{AssertionAttribute: "last_name", UserAttribute: "lastName"},
	{AssertionAttribute: "email", UserAttribute: "mail"},
	{AssertionAttribute: "groups", UserAttribute: "companyGroups"},
}

// AllowedGroups are the groups the risk-based authentication rules let in (Grafana's); everyone
// else is denied.
var AllowedGroups = []string{"skr-monitoring-admin", "skr-monitoring-viewer"}

// The client secret's description and scopes.
const SecretDescription = "SAP Kyma Runtime Secret"

// SecretScopes are the scopes of the client secrets GenerateSecret creates.
var SecretScopes = []string{"ManageApp", "ManageUsers", "OAuth"}

// ClientSecret is one client secret of a service provider as the company lists it (no value).
type ClientSecret struct {
	ID          string   `json:"clientSecretId"`
	Description string   `json:"description"`
	Scopes      []string `json:"scopes"`
}

// ServiceProvider is a service provider (an application) as GET /service/company/global lists it.
type ServiceProvider struct {
	ID                  string               `json:"id"`
	Name                string               `json:"display_name"`
	SSOType             string               `json:"ssoType"`
	RedirectURIs        []string             `json:"redirect_uris"`
	NameIDAttribute     string               `json:"name_id_attribute"`
	AssertionAttributes []AssertionAttribute `json:"assertion_attributes"`
	// UserForRest is the client id its client secrets belong to.
	UserForRest   string         `json:"userForRest"`
	ClientSecrets []ClientSecret `json:"clientSecrets"`
	// Created is true when CreateServiceProvider created it (it then has no client secret) and
	// false when it found one of the name.
	Created bool `json:"-"`
}

// IdentityProvider is an identity provider of the company.
type IdentityProvider struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Company is the body of GET /service/company/global.
type Company struct {
	ServiceProviders  []ServiceProvider  `json:"service_providers"`
	IdentityProviders []IdentityProvider `json:"identity_providers"`
}

// The request bodies (testdata/contract.json).
type (
	oidcConfiguration struct {
		RedirectURIs           []string `json:"redirect_uris"`
		PostLogoutRedirectURIs []string `json:"post_logout_redirect_uris,omitempty"`
	}
	oidcRequest struct {
		SSOType string            `json:"ssoType"`
		OIDC    oidcConfiguration `json:"openId_connect_configuration"`
	}
	assertionAttributesRequest struct {
		AssertionAttributes []AssertionAttribute `json:"assertion_attributes"`
	}
	nameIDRequest struct {
		NameIDAttribute string `json:"name_id_attribute"`
	}
	defaultIDPRequest struct {
		Organization   string `json:"organization"`
		ID             string `json:"id"`
		DefaultAuthIDP string `json:"default_auth_idp"`
	}
	rbaRule struct {
		Action    string `json:"action"`
		Group     string `json:"group"`
		GroupType string `json:"group_type"`
	}
	rbaRequest struct {
		ServiceProvider struct {
			RBAConfig struct {
				Rules         []rbaRule `json:"rba_rules"`
				DefaultAction string    `json:"default_action"`
			} `json:"rba_config"`
		} `json:"service_provider"`
	}
	secretRequest struct {
		Organization string `json:"organization"`
		ID           string `json:"id"`
		Secret       struct {
			Description string   `json:"description"`
			Scopes      []string `json:"scopes"`
		} `json:"rest_api_client_secret"`
	}
	secretResponse struct {
		ClientID     string `json:"clientId"`
		ClientSecret string `json:"clientSecret"`
	}
	deleteSecretsRequest struct {
		ClientID  string   `json:"clientId"`
		SecretIDs []string `json:"clientSecretsIds"`
	}
)

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
		base:   strings.TrimRight(cfg.URL, "/"),
		http:   clientkit.NewHTTPClient(cfg.Timeout, cfg.Metrics.Transport("ias", cfg.Transport)),
	}, nil
}

// Config returns the configuration in use, defaults applied.
func (c *Client) Config() Config { return c.cfg }

// CreateServiceProvider creates a service provider of the given display name unless one exists, in
// which case it returns that one. IAS answers a creation without the id, so the provider is then
// found by its display name; each attempt looks the name up before creating, so a retry after a
// lost answer does not create a duplicate. Names are not unique in IAS, so two actors may both
// create one (a replica paused past its operation's lease and the one that took it over): every
// look-up, the one after the creation too, keeps the provider of the name with the least id and
// deletes the others, so both actors settle on the same one. Created is set only when this call
// created the one it returns and no other actor made one beside it (it then has no secrets yet).
func (c *Client) CreateServiceProvider(ctx context.Context, name string) (*ServiceProvider, error) {
	ctx, cancel := c.caller.Bound(ctx)
	defer cancel()
	op := fmt.Sprintf("creating IAS service provider %q", name)
	if strings.TrimSpace(name) == "" {
		return nil, &Error{Op: op, Err: errors.New("the service provider name is empty")}
	}
	var out *ServiceProvider
	// None of the name existed when this call began: whatever it finds later, this call created.
	created := false
	err := c.retry(ctx, op, func(ctx context.Context) error {
		company, err := c.company(ctx)
		if err != nil {
			return fmt.Errorf("looking up by display name: %w", err)
		}
		found, others, err := c.settle(ctx, company, name)
		if err != nil {
			return err
		}
		if found != nil {
			out = found
			created = created && others == 0
			return nil
		}
		created = true
		form := url.Values{"sp_name": {name}, "company_id": {Organization}}
		if err := c.postForm(ctx, PathServiceProviders, form); err != nil {
			return err
		}
		if company, err = c.company(ctx); err != nil {
			return fmt.Errorf("looking up the created one: %w", err)
		}
		if out, others, err = c.settle(ctx, company, name); err != nil {
			return err
		}
		if out == nil {
			// IAS lists what it created; a retry finds it or creates it again.
			return fmt.Errorf("the created service provider is not listed")
		}
		created = others == 0
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.Created = created
	return out, nil
}

// settle returns the company's service provider of the given name with the least id, deleting
// the others of that name (a second actor's), and how many it deleted.
func (c *Client) settle(ctx context.Context, company *Company, name string) (*ServiceProvider, int, error) {
	var keep *ServiceProvider
	var extra []string
	for i := range company.ServiceProviders {
		sp := &company.ServiceProviders[i]
		if sp.Name != name {
			continue
		}
		switch {
		case keep == nil:
			keep = sp
		case sp.ID < keep.ID:
			extra = append(extra, keep.ID)
			keep = sp
		default:
			extra = append(extra, sp.ID)
		}
	}
	for _, id := range extra {
		if _, err := c.do(ctx, http.MethodPut, PathDelete, url.Values{"sp_id": {id}}, nil, nil); clientkit.IgnoreNotFound(err) != nil {
			return nil, 0, fmt.Errorf("deleting the duplicate service provider %q of %q: %w", id, name, err)
		}
	}
	return keep, len(extra), nil
}

// FindServiceProvider returns the first service provider with the given display name; found is
// false when there is none.
func (c *Client) FindServiceProvider(ctx context.Context, name string) (sp *ServiceProvider, found bool, err error) {
	err = c.retry(ctx, fmt.Sprintf("looking up IAS service provider %q", name), func(ctx context.Context) error {
		company, err := c.company(ctx)
		if err != nil {
			return err
		}
		sp = company.find(name)
		return nil
	})
	return sp, sp != nil, err
}

func (c *Client) company(ctx context.Context) (*Company, error) {
	var out Company
	if _, err := c.do(ctx, http.MethodGet, PathCompanyGlobal, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (co *Company) find(name string) *ServiceProvider {
	for i := range co.ServiceProviders {
		if co.ServiceProviders[i].Name == name {
			return &co.ServiceProviders[i]
		}
	}
	return nil
}

func (co *Company) byID(id string) *ServiceProvider {
	for i := range co.ServiceProviders {
		if co.ServiceProviders[i].ID == id {
			return &co.ServiceProviders[i]
		}
	}
	return nil
}

// ConfigureOIDC makes the service provider an OpenID Connect application with exactly the given
// redirect URIs, then sets its assertion attributes (AssertionAttributes), identifies users by
// e-mail (SubjectNameIdentifier), makes the configured identity provider the default one (when
// configured; found by name among the company's) and lets only AllowedGroups in. Every call sets
// absolute values, so repeating ConfigureOIDC is harmless.
func (c *Client) ConfigureOIDC(ctx context.Context, id string, redirectURIs []string) error {
	// One budget for all the calls this takes.
	ctx, cancel := c.caller.Bound(ctx)
	defer cancel()
	op := fmt.Sprintf("configuring OpenID Connect for IAS service provider %q", id)
	if err := checkID(op, id); err != nil {
		return err
	}
	spPath := PathServiceProviders + "/" + url.PathEscape(id)
	var rba rbaRequest
	rba.ServiceProvider.RBAConfig.DefaultAction = "Deny"
	for _, g := range AllowedGroups {
		rba.ServiceProvider.RBAConfig.Rules = append(rba.ServiceProvider.RBAConfig.Rules, rbaRule{Action: "Allow", Group: g, GroupType: "Cloud"})
	}
	steps := []struct {
		what string
		path string
		body func(ctx context.Context) (any, error)
	}{
		{"setting the OpenID Connect configuration", spPath, func(context.Context) (any, error) {
			return oidcRequest{SSOType: SSOTypeOpenIDConnect, OIDC: oidcConfiguration{RedirectURIs: append([]string{}, redirectURIs...)}}, nil
		}},
		{"setting the assertion attributes", spPath, func(context.Context) (any, error) {
			return assertionAttributesRequest{AssertionAttributes: AssertionAttributes}, nil
		}},
		{"setting the subject name identifier", spPath, func(context.Context) (any, error) {
			return nameIDRequest{NameIDAttribute: SubjectNameIdentifier}, nil
		}},
		{"setting the default identity provider", PathServiceProviders, func(ctx context.Context) (any, error) {
			if c.cfg.IdentityProvider == "" {
				return nil, nil
			}
			idp, err := c.identityProvider(ctx, c.cfg.IdentityProvider)
			if err != nil {
				return nil, err
			}
			return defaultIDPRequest{Organization: Organization, ID: id, DefaultAuthIDP: c.base + PathIdentityProviders + "/" + idp}, nil
		}},
		{"setting the risk-based authentication", spPath + "/rba", func(context.Context) (any, error) { return rba, nil }},
	}
	for _, s := range steps {
		err := c.retry(ctx, op+": "+s.what, func(ctx context.Context) error {
			body, err := s.body(ctx)
			if err != nil || body == nil {
				return err
			}
			_, err = c.do(ctx, http.MethodPut, s.path, nil, body, nil)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// identityProvider returns the id of the company's identity provider of the given name.
func (c *Client) identityProvider(ctx context.Context, name string) (string, error) {
	company, err := c.company(ctx)
	if err != nil {
		return "", fmt.Errorf("looking up identity provider %q: %w", name, err)
	}
	for _, idp := range company.IdentityProviders {
		if idp.Name == name {
			return idp.ID, nil
		}
	}
	return "", clientkit.Permanent(fmt.Errorf("IAS has no identity provider named %q (APP_IAS_IDENTITY_PROVIDER)", name))
}

// GenerateSecret replaces the service provider's client secrets with a new one and returns it with
// its client id. Creating a secret is not idempotent in IAS (each creation adds one), so every
// attempt first deletes the secrets the company lists for the service provider: exactly one valid
// secret exists however often this runs, after a crash before the caller kept the secret or an
// answer lost on the way (a secret created that nobody knows).
func (c *Client) GenerateSecret(ctx context.Context, id string) (clientID, clientSecret string, err error) {
	return c.generateSecret(ctx, id, true)
}

// GenerateFirstSecret creates the first client secret of a service provider that
// CreateServiceProvider has just created (Created): it has none, so the first attempt deletes
// nothing. Should an attempt's answer be lost, the next ones delete first, as GenerateSecret does.
// For any other service provider use GenerateSecret.
func (c *Client) GenerateFirstSecret(ctx context.Context, id string) (clientID, clientSecret string, err error) {
	return c.generateSecret(ctx, id, false)
}

func (c *Client) generateSecret(ctx context.Context, id string, mayHaveSecrets bool) (clientID, clientSecret string, err error) {
	ctx, cancel := c.caller.Bound(ctx)
	defer cancel()
	op := fmt.Sprintf("generating a client secret for IAS service provider %q", id)
	if err := checkID(op, id); err != nil {
		return "", "", err
	}
	req := secretRequest{Organization: Organization, ID: id}
	req.Secret.Description, req.Secret.Scopes = SecretDescription, SecretScopes
	var out secretResponse
	err = c.retry(ctx, op, func(ctx context.Context) error {
		if mayHaveSecrets {
			if err := c.deleteSecrets(ctx, id); err != nil {
				return fmt.Errorf("deleting earlier secrets: %w", err)
			}
		}
		// An attempt that fails may have created a secret whose answer was lost.
		mayHaveSecrets = true
		if _, err := c.do(ctx, http.MethodPut, PathServiceProviders, nil, req, &out); err != nil {
			return err
		}
		if out.ClientID == "" || out.ClientSecret == "" {
			return clientkit.Permanent(errors.New("the response lacks clientId or clientSecret"))
		}
		return nil
	})
	if err != nil {
		return "", "", err
	}
	return out.ClientID, out.ClientSecret, nil
}

// deleteSecrets deletes the client secrets the company lists for the service provider.
func (c *Client) deleteSecrets(ctx context.Context, id string) error {
	company, err := c.company(ctx)
	if err != nil {
		return err
	}
	sp := company.byID(id)
	if sp == nil {
		return clientkit.Permanent(fmt.Errorf("IAS lists no service provider %q", id))
	}
	if len(sp.ClientSecrets) == 0 {
		return nil
	}
	req := deleteSecretsRequest{ClientID: sp.UserForRest}
	for _, s := range sp.ClientSecrets {
		req.SecretIDs = append(req.SecretIDs, s.ID)
	}
	_, err = c.do(ctx, http.MethodDelete, PathDeleteSecret, nil, req, nil)
	return clientkit.IgnoreNotFound(err)
}

// DeleteServiceProvider deletes the service provider; deleting a missing one succeeds.
func (c *Client) DeleteServiceProvider(ctx context.Context, id string) error {
	op := fmt.Sprintf("deleting IAS service provider %q", id)
	if err := checkID(op, id); err != nil {
		return err
	}
	return c.retry(ctx, op, func(ctx context.Context) error {
		_, err := c.do(ctx, http.MethodPut, PathDelete, url.Values{"sp_id": {id}}, nil, nil)
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
// call's budget, sleeping with jittered exponential backoff between attempts; while the system is
// down it fails at once.
func (c *Client) retry(ctx context.Context, op string, attempt func(context.Context) error) error {
	return c.caller.Retry(ctx, op, attempt)
}

// do makes one request with basic auth; in and out are JSON bodies, either may be nil. It returns
// the response, whose body is already read and closed, on a 2xx answer.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) (*http.Response, error) {
	return clientkit.DoJSON(ctx, c.http, c.authorize, method, c.base, path, query, in, out)
}

// maxResponse bounds how much of an answer to a form is read (it carries no body the client uses).
const maxResponse = 1 << 20

// postForm posts a form-urlencoded body, the only kind the creation of a service provider takes.
func (c *Client) postForm(ctx context.Context, path string, form url.Values) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		return clientkit.Permanent(err)
	}
	c.authorize(req)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	clientkit.NoteAnswer(ctx, resp.StatusCode)
	data, err := httpbody.Read(io.LimitReader(resp.Body, maxResponse), resp.ContentLength, maxResponse)
	if err != nil {
		return fmt.Errorf("reading response: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return clientkit.NewStatusError(resp, bytes.TrimSpace(data))
	}
	return nil
}

func (c *Client) authorize(req *http.Request) { req.SetBasicAuth(c.cfg.UserID, c.cfg.Password) }

func newCaller(cfg Config) *clientkit.Caller {
	return clientkit.NewCaller("ias", cfg.RetryInitialBackoff, cfg.RetryMaxBackoff, cfg.Calls, cfg.Metrics)
}
