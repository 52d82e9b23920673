// Package iasstandin is the sandbox stand-in for SAP's Identity Authentication Service (IAS) service
// provider API as the broker calls it (internal/clients/ias/testdata/contract.json): the company's
// listing, creation from a form, the OpenID Connect, assertion attribute, subject name identifier,
// default identity provider and risk-based authentication settings, client secrets and deletion,
// all behind HTTP basic authentication. It rejects what IAS would not take from the broker: another
// content type, missing or unknown fields, unknown values. It keeps its state in a durable.Store (one
// row per service provider and counter) and counts calls per service provider and creations per
// name, so tests can see duplicates.
package iasstandin

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
)

// Name is the path prefix the stand-in is mounted at.
const Name = "ias"

// CompanyID is the only company: the company_id of creations and the organization of settings.
const CompanyID = "global"

// SSO types a service provider can have.
const (
	SSOTypeOpenIDConnect = "openIdConnect"
	SSOTypeSAML2         = "saml2"
)

// AssertionAttribute maps a user attribute to the name it has in assertions and tokens.
type AssertionAttribute struct {
	AssertionAttribute string `json:"assertionAttribute"`
	UserAttribute      string `json:"userAttribute"`
}

// RBARule is one rule of the risk-based authentication.
type RBARule struct {
	Action    string `json:"action"`
	Group     string `json:"group"`
	GroupType string `json:"group_type"`
}

// RBAConfig is the risk-based authentication of a service provider.
type RBAConfig struct {
	RBARules      []RBARule `json:"rba_rules"`
	DefaultAction string    `json:"default_action"`
}

// ClientSecret is a client secret as the company lists it: without its value.
type ClientSecret struct {
	ID          string   `json:"clientSecretId"`
	Description string   `json:"description"`
	Scopes      []string `json:"scopes"`
}

// IdentityProvider is an identity provider of the company.
type IdentityProvider struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// ServiceProvider is a service provider (an application) as GET /service/company/global lists it.
type ServiceProvider struct {
	ID                     string               `json:"id"`
	Name                   string               `json:"display_name"`
	Organization           string               `json:"organization"`
	SSOType                string               `json:"ssoType"`
	RedirectURIs           []string             `json:"redirect_uris"`
	PostLogoutRedirectURIs []string             `json:"post_logout_redirect_uris,omitempty"`
	NameIDAttribute        string               `json:"name_id_attribute"`
	AssertionAttributes    []AssertionAttribute `json:"assertion_attributes"`
	AuthenticatingIdp      *IdentityProvider    `json:"authenticatingIdp,omitempty"`
	RBAConfig              RBAConfig            `json:"rba_config"`
	// UserForRest is the client id of its client secrets.
	UserForRest   string         `json:"userForRest"`
	ClientSecrets []ClientSecret `json:"clientSecrets"`
}

// Company is the body of GET /service/company/global.
type Company struct {
	ServiceProviders  []ServiceProvider  `json:"service_providers"`
	IdentityProviders []IdentityProvider `json:"identity_providers"`
}

// Secret is the body answering the creation of a client secret.
type Secret struct {
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret"`
}

// DefaultIdentityProviders are the company's identity providers unless Options name others.
var DefaultIdentityProviders = []IdentityProvider{{ID: "5e6c0c29-0000-4000-8000-000000000001", Name: "sap.default"}}

// Options configures the stand-in.
type Options struct {
	// User and Password are the only basic auth credentials the API accepts.
	User     string
	Password string
	// IdentityProviders are the company's; DefaultIdentityProviders when empty.
	IdentityProviders []IdentityProvider
	// Store keeps the service providers and counts; Open loads them from it. New uses a new MemoryStore.
	Store durable.Store
}

// Object is one service provider in the inspection snapshot with its number of client secrets and
// the calls made on it.
type Object struct {
	ServiceProvider
	Secrets int            `json:"secrets"`
	Calls   map[string]int `json:"calls"`
}

// Objects is the inspection snapshot served at GET /_sandbox/ias/objects.
type Objects struct {
	// ServiceProviders lists the existing service providers in creation order.
	ServiceProviders []Object `json:"serviceProviders"`
	// CreatesByName counts successful creations per name, deleted ones included.
	CreatesByName map[string]int `json:"createsByName"`
	// DeletesByName counts successful deletions per name.
	DeletesByName map[string]int `json:"deletesByName"`
	// Calls counts authorised calls per operation, including those that failed validation, and
	// rejected credentials as "unauthorized".
	Calls map[string]int `json:"calls"`
}

// record is a service provider with its secrets' values and calls; it is also its row in the store.
type record struct {
	Seq     int64             `json:"seq"`
	SP      *ServiceProvider  `json:"sp"`
	Secrets map[string]string `json:"secrets"` // value by clientSecretId
	Calls   map[string]int    `json:"calls"`
}

// The kinds of rows in the store.
const (
	kindServiceProvider = "serviceProvider"
	kindSeq             = "seq"
	kindCreates         = "createsByName"
	kindDeletes         = "deletesByName"
	kindTotals          = "calls"
	lookupName          = "name"
	lookupClient        = "client"
)

// StandIn is the IAS stand-in; it implements sandbox.System.
type StandIn struct {
	opts Options
	idps []IdentityProvider

	durable *durable.Durable
	handler http.Handler

	mu            sync.Mutex
	seq           *durable.Counts
	sps           *durable.Table[record] // by ID; found by name and by userForRest too
	createsByName *durable.Counts
	deletesByName *durable.Counts
	totals        *durable.Counts
}

// New returns a stand-in without service providers that keeps its state in memory.
func New(opts Options) *StandIn {
	opts.Store = nil // a new MemoryStore
	return durable.InMemory(Open(context.Background(), opts))
}

// Open returns a stand-in with the service providers and counts kept in opts.Store.
func Open(ctx context.Context, opts Options) (*StandIn, error) {
	s := &StandIn{opts: opts, idps: opts.IdentityProviders}
	if len(s.idps) == 0 {
		s.idps = DefaultIdentityProviders
	}
	s.durable = durable.NewDurable(durable.Persist{Store: opts.Store, System: Name, Lock: &s.mu})
	s.sps = durable.NewTable[record](s.durable, kindServiceProvider, false)
	s.sps.Lookup(lookupName, func(rec *record) []string { return []string{rec.SP.Name} })
	s.sps.UniqueLookup(lookupClient, func(rec *record) []string { return []string{rec.SP.UserForRest} })
	s.seq = s.durable.Counts(kindSeq)
	s.createsByName = s.sps.Counts(lookupName, "creates", kindCreates)
	s.deletesByName = s.sps.Counts(lookupName, "deletes", kindDeletes)
	s.totals = s.durable.Tally(kindTotals)
	if err := s.durable.Load(ctx); err != nil {
		return nil, err
	}
	m := http.NewServeMux()
	m.HandleFunc("GET /service/company/global", s.authorised(s.handleCompany))
	m.HandleFunc("POST /service/sps", s.authorised(s.handleCreate))
	m.HandleFunc("PUT /service/sps", s.authorised(s.handleCompanySettings))
	m.HandleFunc("PUT /service/sps/delete", s.authorised(s.handleDelete))
	m.HandleFunc("PUT /service/sps/{id}", s.authorised(s.handleConfigure))
	m.HandleFunc("PUT /service/sps/{id}/rba", s.authorised(s.handleRBA))
	m.HandleFunc("DELETE /service/sps/clientSecret", s.authorised(s.handleDeleteSecrets))
	s.handler = s.durable.Handler(m)
	return s, nil
}

// Name implements sandbox.System.
func (s *StandIn) Name() string { return Name }

// ServeHTTP implements sandbox.System; paths are relative to /ias.
func (s *StandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Objects implements sandbox.System.
func (s *StandIn) Objects() any { return s.Snapshot() }

// Reset implements sandbox.System: it forgets every service provider and count, durably.
func (s *StandIn) Reset(ctx context.Context) error { return s.durable.Reset(ctx) }

// get returns the service provider id; change it only to put it back.
func (s *StandIn) get(id string) (*record, bool) {
	rec, ok := s.sps.Get(id)
	if ok && rec.Calls == nil {
		rec.Calls = map[string]int{}
	}
	return rec, ok
}

// Snapshot returns the inspection snapshot.
func (s *StandIn) Snapshot() Objects {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Objects{
		ServiceProviders: []Object{},
		CreatesByName:    s.createsByName.Map(),
		DeletesByName:    s.deletesByName.Map(),
		Calls:            s.totals.Map(),
	}
	for _, rec := range s.sorted(s.sps.All()) {
		calls := make(map[string]int, len(rec.Calls))
		for k, v := range rec.Calls {
			calls[k] = v
		}
		out.ServiceProviders = append(out.ServiceProviders, Object{ServiceProvider: clone(rec.SP), Secrets: len(rec.Secrets), Calls: calls})
	}
	return out
}

// sorted returns the records in creation order.
func (s *StandIn) sorted(sps map[string]*record) []*record {
	recs := make([]*record, 0, len(sps))
	for _, rec := range sps {
		recs = append(recs, rec)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Seq < recs[j].Seq })
	return recs
}

func clone(sp *ServiceProvider) ServiceProvider {
	c := *sp
	c.RedirectURIs = append([]string{}, sp.RedirectURIs...)
	if sp.PostLogoutRedirectURIs != nil {
		c.PostLogoutRedirectURIs = append([]string{}, sp.PostLogoutRedirectURIs...)
	}
	c.AssertionAttributes = append([]AssertionAttribute{}, sp.AssertionAttributes...)
	c.RBAConfig.RBARules = append([]RBARule{}, sp.RBAConfig.RBARules...)
	c.ClientSecrets = make([]ClientSecret, 0, len(sp.ClientSecrets))
	for _, cs := range sp.ClientSecrets {
		cs.Scopes = append([]string{}, cs.Scopes...)
		c.ClientSecrets = append(c.ClientSecrets, cs)
	}
	if sp.AuthenticatingIdp != nil {
		idp := *sp.AuthenticatingIdp
		c.AuthenticatingIdp = &idp
	}
	return c
}

type apiError struct {
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	sandbox.WriteJSON(w, status, apiError{Message: fmt.Sprintf(format, args...)})
}

func (s *StandIn) authorised(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		user, password, ok := r.BasicAuth()
		valid := ok && s.opts.User != "" &&
			subtle.ConstantTimeCompare([]byte(user), []byte(s.opts.User)) == 1 &&
			subtle.ConstantTimeCompare([]byte(password), []byte(s.opts.Password)) == 1
		if !valid {
			s.mu.Lock()
			s.totals.Inc("unauthorized")
			s.mu.Unlock()
			w.Header().Set("WWW-Authenticate", `Basic realm="ias"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong basic auth credentials")
			return
		}
		next(w, r)
	}
}

func randomHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf)
	return hex.EncodeToString(buf)
}

// newID returns a random UUID-shaped id.
func newID() string {
	h := randomHex(16)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// countLocked counts op in the totals and, when the service provider exists, on it.
func (s *StandIn) countLocked(id, op string) *record {
	s.totals.Inc(op)
	rec, ok := s.get(id)
	if !ok {
		return nil
	}
	rec.Calls[op]++
	s.sps.Put(id, rec)
	return rec
}

func notFound(w http.ResponseWriter, id string) {
	writeError(w, http.StatusNotFound, "service provider %q not found", id)
}

// errContentType is a body of another content type than the request takes.
var errContentType = errors.New("unsupported content type")

// decodeJSON decodes the JSON body of r into v, refusing other content types and unknown fields.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return fmt.Errorf("%w %q: the body must be application/json", errContentType, r.Header.Get("Content-Type"))
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	return nil
}

// badBody answers a body decodeJSON refused.
func badBody(w http.ResponseWriter, err error) {
	status := http.StatusBadRequest
	if errors.Is(err, errContentType) {
		status = http.StatusUnsupportedMediaType
	}
	writeError(w, status, "%v", err)
}

func (s *StandIn) handleCompany(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.totals.Inc("company")
	out := Company{ServiceProviders: []ServiceProvider{}, IdentityProviders: append([]IdentityProvider{}, s.idps...)}
	for _, rec := range s.sorted(s.sps.All()) {
		out.ServiceProviders = append(out.ServiceProviders, clone(rec.SP))
	}
	sandbox.WriteJSON(w, http.StatusOK, out)
}

// createFields are the fields a creation's form takes.
var createFields = map[string]bool{"sp_name": true, "company_id": true}

func (s *StandIn) handleCreate(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.totals.Inc("create")
	s.mu.Unlock()
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		writeError(w, http.StatusUnsupportedMediaType, "content type %q: a service provider is created from an application/x-www-form-urlencoded form", r.Header.Get("Content-Type"))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, "invalid form: %v", err)
		return
	}
	for k := range r.PostForm {
		if !createFields[k] {
			writeError(w, http.StatusBadRequest, "unknown form field %q", k)
			return
		}
	}
	name, company := r.PostForm.Get("sp_name"), r.PostForm.Get("company_id")
	switch {
	case strings.TrimSpace(name) == "":
		writeError(w, http.StatusBadRequest, "sp_name is required")
		return
	case len(name) > 255:
		writeError(w, http.StatusBadRequest, "sp_name is longer than 255 characters")
		return
	case company == "":
		writeError(w, http.StatusBadRequest, "company_id is required")
		return
	case company != CompanyID:
		writeError(w, http.StatusNotFound, "company %q not found", company)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := newID() // 122 random bits: never taken, so nothing is read
	s.sps.Create(id, &record{
		Seq: int64(s.seq.Inc(kindServiceProvider)),
		SP: &ServiceProvider{ID: id, Name: name, Organization: CompanyID, SSOType: SSOTypeSAML2, RedirectURIs: []string{},
			AssertionAttributes: []AssertionAttribute{}, NameIDAttribute: "uid", UserForRest: newID(),
			RBAConfig: RBAConfig{RBARules: []RBARule{}, DefaultAction: "Allow"}, ClientSecrets: []ClientSecret{}},
		Secrets: map[string]string{},
		Calls:   map[string]int{"create": 1},
	})
	s.createsByName.Add(name, 1)
	w.WriteHeader(http.StatusCreated)
}

func validURI(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "https" || p.Scheme == "http") && p.Host != ""
}

// configureRequest is any of the bodies of PUT /service/sps/{id}: the SSO type with its OpenID
// Connect or SAML settings, the assertion attributes, or the subject name identifier. Absent fields
// stay as they are.
type configureRequest struct {
	SPName              *string               `json:"sp_name"`
	SSOType             *string               `json:"ssoType"`
	OIDC                *oidcConfiguration    `json:"openId_connect_configuration"`
	ACSEndpoints        *[]acsEndpoint        `json:"acs_endpoints"`
	AssertionAttributes *[]AssertionAttribute `json:"assertion_attributes"`
	NameIDAttribute     *string               `json:"name_id_attribute"`
}

type oidcConfiguration struct {
	RedirectURIs           *[]string `json:"redirect_uris"`
	PostLogoutRedirectURIs []string  `json:"post_logout_redirect_uris"`
}

type acsEndpoint struct {
	Location  string `json:"location"`
	IsDefault bool   `json:"isDefault"`
	Index     int32  `json:"index"`
}

var nameIDAttributes = map[string]bool{"none": true, "uid": true, "mail": true, "loginName": true, "displayName": true}

// check reports what makes req invalid.
func (req configureRequest) check() error {
	if req.SPName == nil && req.SSOType == nil && req.OIDC == nil && req.ACSEndpoints == nil && req.AssertionAttributes == nil && req.NameIDAttribute == nil {
		return errors.New("the body sets nothing")
	}
	if req.SPName != nil && (strings.TrimSpace(*req.SPName) == "" || len(*req.SPName) > 255) {
		return errors.New("sp_name must have 1 to 255 characters")
	}
	if req.SSOType != nil && *req.SSOType != SSOTypeOpenIDConnect && *req.SSOType != SSOTypeSAML2 {
		return fmt.Errorf("ssoType %q is neither %q nor %q", *req.SSOType, SSOTypeOpenIDConnect, SSOTypeSAML2)
	}
	if req.OIDC != nil {
		if req.OIDC.RedirectURIs == nil {
			return errors.New("openId_connect_configuration needs redirect_uris")
		}
		for _, u := range append(append([]string{}, *req.OIDC.RedirectURIs...), req.OIDC.PostLogoutRedirectURIs...) {
			if !validURI(u) {
				return fmt.Errorf("redirect URI %q is not an absolute http(s) URL", u)
			}
		}
	}
	if req.ACSEndpoints != nil {
		for _, e := range *req.ACSEndpoints {
			if !validURI(e.Location) {
				return fmt.Errorf("ACS endpoint %q is not an absolute http(s) URL", e.Location)
			}
		}
	}
	if req.AssertionAttributes != nil {
		for _, a := range *req.AssertionAttributes {
			if a.AssertionAttribute == "" || a.UserAttribute == "" {
				return errors.New("an assertion attribute needs assertionAttribute and userAttribute")
			}
		}
	}
	if req.NameIDAttribute != nil && !nameIDAttributes[*req.NameIDAttribute] {
		return fmt.Errorf("unknown name_id_attribute %q", *req.NameIDAttribute)
	}
	return nil
}

func (s *StandIn) handleConfigure(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var req configureRequest
	err := decodeJSON(w, r, &req)
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.countLocked(id, "configure")
	if err != nil {
		badBody(w, err)
		return
	}
	if err := req.check(); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if rec == nil {
		notFound(w, id)
		return
	}
	sp := rec.SP
	if req.SPName != nil {
		sp.Name = *req.SPName
	}
	if req.SSOType != nil {
		sp.SSOType = *req.SSOType
	}
	if req.OIDC != nil {
		sp.RedirectURIs = append([]string{}, *req.OIDC.RedirectURIs...)
		sp.PostLogoutRedirectURIs = append([]string(nil), req.OIDC.PostLogoutRedirectURIs...)
	}
	if req.AssertionAttributes != nil {
		sp.AssertionAttributes = append([]AssertionAttribute{}, *req.AssertionAttributes...)
	}
	if req.NameIDAttribute != nil {
		sp.NameIDAttribute = *req.NameIDAttribute
	}
	s.sps.Put(id, rec)
	w.WriteHeader(http.StatusOK)
}

type rbaRequest struct {
	ServiceProvider *struct {
		RBAConfig *RBAConfig `json:"rba_config"`
	} `json:"service_provider"`
}

var rbaActions = map[string]bool{"Allow": true, "Deny": true}

func (s *StandIn) handleRBA(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var req rbaRequest
	err := decodeJSON(w, r, &req)
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.countLocked(id, "rba")
	if err != nil {
		badBody(w, err)
		return
	}
	if req.ServiceProvider == nil || req.ServiceProvider.RBAConfig == nil {
		writeError(w, http.StatusBadRequest, "service_provider.rba_config is required")
		return
	}
	cfg := req.ServiceProvider.RBAConfig
	if !rbaActions[cfg.DefaultAction] {
		writeError(w, http.StatusBadRequest, "default_action %q is neither Allow nor Deny", cfg.DefaultAction)
		return
	}
	for _, rule := range cfg.RBARules {
		if !rbaActions[rule.Action] || rule.Group == "" || rule.GroupType != "Cloud" {
			writeError(w, http.StatusBadRequest, "an rba rule needs action Allow or Deny, a group and group_type Cloud")
			return
		}
	}
	if rec == nil {
		notFound(w, id)
		return
	}
	rec.SP.RBAConfig = RBAConfig{RBARules: append([]RBARule{}, cfg.RBARules...), DefaultAction: cfg.DefaultAction}
	s.sps.Put(id, rec)
	w.WriteHeader(http.StatusOK)
}

// settingsRequest is either body of PUT /service/sps: the default identity provider, or the
// creation of a client secret.
type settingsRequest struct {
	Organization   string  `json:"organization"`
	ID             string  `json:"id"`
	DefaultAuthIDP *string `json:"default_auth_idp"`
	Secret         *struct {
		Description string   `json:"description"`
		Scopes      []string `json:"scopes"`
	} `json:"rest_api_client_secret"`
}

var secretScopes = map[string]bool{"ManageApp": true, "ManageUsers": true, "OAuth": true}

func (s *StandIn) handleCompanySettings(w http.ResponseWriter, r *http.Request) {
	var req settingsRequest
	err := decodeJSON(w, r, &req)
	op := "settings"
	if err == nil && req.Secret != nil {
		op = "createSecret"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.countLocked(req.ID, op)
	switch {
	case err != nil:
		badBody(w, err)
		return
	case req.ID == "":
		writeError(w, http.StatusBadRequest, "id is required")
		return
	case req.Organization != CompanyID:
		writeError(w, http.StatusBadRequest, "organization %q is not the company %q", req.Organization, CompanyID)
		return
	case (req.Secret == nil) == (req.DefaultAuthIDP == nil):
		writeError(w, http.StatusBadRequest, "the body sets either default_auth_idp or rest_api_client_secret")
		return
	case rec == nil:
		notFound(w, req.ID)
		return
	}
	if req.DefaultAuthIDP != nil {
		idp := s.identityProvider(*req.DefaultAuthIDP)
		if idp == nil {
			writeError(w, http.StatusBadRequest, "default_auth_idp %q is not <IAS URL>/service/idp/<id> of an identity provider of the company", *req.DefaultAuthIDP)
			return
		}
		rec.SP.AuthenticatingIdp = idp
		s.sps.Put(req.ID, rec)
		w.WriteHeader(http.StatusOK)
		return
	}
	if len(req.Secret.Scopes) == 0 {
		writeError(w, http.StatusBadRequest, "rest_api_client_secret needs scopes")
		return
	}
	for _, sc := range req.Secret.Scopes {
		if !secretScopes[sc] {
			writeError(w, http.StatusBadRequest, "unknown scope %q", sc)
			return
		}
	}
	if len(req.Secret.Description) > 255 {
		writeError(w, http.StatusBadRequest, "the description is longer than 255 characters")
		return
	}
	secretID, value := newID(), randomHex(24)
	if rec.Secrets == nil {
		rec.Secrets = map[string]string{}
	}
	rec.Secrets[secretID] = value
	rec.SP.ClientSecrets = append(rec.SP.ClientSecrets, ClientSecret{ID: secretID, Description: req.Secret.Description, Scopes: append([]string{}, req.Secret.Scopes...)})
	s.sps.Put(req.ID, rec)
	sandbox.WriteJSON(w, http.StatusCreated, Secret{ClientID: rec.SP.UserForRest, ClientSecret: value})
}

// identityProvider returns the company's identity provider the URL <IAS URL>/service/idp/<id> names.
func (s *StandIn) identityProvider(u string) *IdentityProvider {
	p, err := url.Parse(u)
	if err != nil || !validURI(u) {
		return nil
	}
	prefix := "/service/idp/"
	i := strings.LastIndex(p.Path, prefix)
	if i < 0 {
		return nil
	}
	id := p.Path[i+len(prefix):]
	for _, idp := range s.idps {
		if idp.ID == id {
			out := idp
			return &out
		}
	}
	return nil
}

func (s *StandIn) handleDelete(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("sp_id")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.totals.Inc("delete")
	if id == "" {
		writeError(w, http.StatusBadRequest, "the query parameter sp_id is required")
		return
	}
	rec, ok := s.get(id)
	if !ok {
		notFound(w, id)
		return
	}
	s.sps.Delete(id)
	s.deletesByName.Add(rec.SP.Name, 1)
	w.WriteHeader(http.StatusOK)
}

type deleteSecretsRequest struct {
	ClientID  string   `json:"clientId"`
	SecretIDs []string `json:"clientSecretsIds"`
}

func (s *StandIn) handleDeleteSecrets(w http.ResponseWriter, r *http.Request) {
	var req deleteSecretsRequest
	err := decodeJSON(w, r, &req)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.totals.Inc("deleteSecrets")
	switch {
	case err != nil:
		badBody(w, err)
		return
	case req.ClientID == "":
		writeError(w, http.StatusBadRequest, "clientId is required")
		return
	case len(req.SecretIDs) == 0:
		writeError(w, http.StatusBadRequest, "clientSecretsIds is required")
		return
	}
	rec := s.byClient(req.ClientID)
	if rec == nil {
		writeError(w, http.StatusNotFound, "client %q not found", req.ClientID)
		return
	}
	rec.Calls["deleteSecrets"]++
	drop := map[string]bool{}
	for _, sid := range req.SecretIDs {
		drop[sid] = true
		delete(rec.Secrets, sid)
	}
	kept := []ClientSecret{}
	for _, cs := range rec.SP.ClientSecrets {
		if !drop[cs.ID] {
			kept = append(kept, cs)
		}
	}
	rec.SP.ClientSecrets = kept
	s.sps.Put(rec.SP.ID, rec)
	w.WriteHeader(http.StatusNoContent)
}

// byClient returns the service provider whose userForRest is clientID.
func (s *StandIn) byClient(clientID string) *record {
	for id, rec := range s.sps.Find(lookupClient, clientID) {
		if rec.SP.UserForRest == clientID {
			rec, _ := s.get(id)
			return rec
		}
	}
	return nil
}

// HasSecret tells whether secret is a current client secret of the client clientID (a service
// provider's userForRest).
func (s *StandIn) HasSecret(clientID, secret string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.byClient(clientID)
	if rec == nil {
		return false
	}
	for _, have := range rec.Secrets {
		if subtle.ConstantTimeCompare([]byte(have), []byte(secret)) == 1 {
			return true
		}
	}
	return false
}
