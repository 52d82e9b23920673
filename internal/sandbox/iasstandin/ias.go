// Package ias is the sandbox stand-in for SAP's Identity Authentication Service (IAS) service provider
// API as the broker uses it: search, create, read, update (SSO type and OpenID Connect settings),
// authentication settings (subject name identifier, assertion attributes, default identity provider),
// client secrets and deletion, all behind HTTP basic authentication. It keeps its state in a
// durable.Store (one row per service provider and counter) and counts calls per service provider and
// creations per name, so tests can see duplicates.
package iasstandin

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
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

// SSO types a service provider can have.
const (
	SSOTypeOpenIDConnect = "openIdConnect"
	SSOTypeSAML2         = "saml2"
)

// OIDCConfiguration is the OpenID Connect configuration of a service provider.
type OIDCConfiguration struct {
	PostLogoutRedirectURIs []string `json:"post_logout_redirect_uris"`
}

// AssertionAttribute maps a user attribute to the name it has in assertions and tokens.
type AssertionAttribute struct {
	AssertionAttributeName string `json:"assertion_attribute_name"`
	UserAttributeName      string `json:"user_attribute_name"`
}

// ServiceProvider is a service provider (an application) as the API returns it. Its OpenID Connect
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
}

// SearchResult is the body of GET /service/sps.
type SearchResult struct {
	ServiceProviders []ServiceProvider `json:"service_providers"`
}

// Secret is the body answering POST /service/sps/<id>/client-secrets.
type Secret struct {
	ClientID     string `json:"clientid"`
	ClientSecret string `json:"clientsecret"`
}

type createRequest struct {
	Name string `json:"sp_name"`
}

// updateRequest is the body of PUT /service/sps; absent fields stay as they are.
type updateRequest struct {
	ID                         string             `json:"id"`
	SSOType                    string             `json:"sso_type"`
	OpenIDConnectConfiguration *OIDCConfiguration `json:"openid_connect_configuration"`
	RedirectURIs               []string           `json:"redirect_uris"`
}

// rbaRequest is the body of POST /service/sps/<id>/rba; absent fields stay as they are.
type rbaRequest struct {
	SubjectNameIdentifier    string               `json:"subject_name_identifier"`
	AssertionAttributes      []AssertionAttribute `json:"assertion_attributes"`
	DefaultAuthenticatingIDP string               `json:"default_authenticating_idp"`
}

// Options configures the stand-in.
type Options struct {
	// User and Password are the only basic auth credentials the API accepts.
	User     string
	Password string
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

// record is a service provider with its secrets and calls; it is also its row in the store.
type record struct {
	Seq     int64            `json:"seq"`
	SP      *ServiceProvider `json:"sp"`
	Secrets []string         `json:"secrets"`
	Calls   map[string]int   `json:"calls"`
}

// The kinds of rows in the store.
const (
	kindServiceProvider = "serviceProvider"
	kindSeq             = "seq"
	kindCreates         = "createsByName"
	kindDeletes         = "deletesByName"
	kindTotals          = "calls"
	lookupName          = "name"
)

// StandIn is the IAS stand-in; it implements sandbox.System.
type StandIn struct {
	opts Options
	mux  *http.ServeMux

	durable *durable.Durable
	handler http.Handler

	mu            sync.Mutex
	seq           *durable.Counts
	sps           *durable.Table[record] // by ID; found by name too
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
	s := &StandIn{opts: opts}
	s.durable = durable.NewDurable(durable.Persist{Store: opts.Store, System: Name, Lock: &s.mu})
	s.sps = durable.NewTable[record](s.durable, kindServiceProvider, false)
	s.sps.Lookup(lookupName, func(rec *record) []string { return []string{rec.SP.Name} })
	s.seq = s.durable.Counts(kindSeq)
	s.createsByName = s.sps.Counts(lookupName, "creates", kindCreates)
	s.deletesByName = s.sps.Counts(lookupName, "deletes", kindDeletes)
	s.totals = s.durable.Tally(kindTotals)
	if err := s.durable.Load(ctx); err != nil {
		return nil, err
	}
	m := http.NewServeMux()
	const base = "/service/sps"
	m.HandleFunc("GET "+base, s.authorised(s.handleSearch))
	m.HandleFunc("POST "+base, s.authorised(s.handleCreate))
	m.HandleFunc("PUT "+base, s.authorised(s.handleUpdate))
	m.HandleFunc("GET "+base+"/{id}", s.authorised(s.handleGet))
	m.HandleFunc("DELETE "+base+"/{id}", s.authorised(s.handleDelete))
	m.HandleFunc("POST "+base+"/{id}/rba", s.authorised(s.handleRBA))
	m.HandleFunc("POST "+base+"/{id}/client-secrets", s.authorised(s.handleCreateSecret))
	m.HandleFunc("DELETE "+base+"/{id}/client-secrets", s.authorised(s.handleDeleteSecrets))
	s.mux = m
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
	c.AssertionAttributes = append([]AssertionAttribute{}, sp.AssertionAttributes...)
	c.OpenIDConnectConfiguration.PostLogoutRedirectURIs = append([]string{}, sp.OpenIDConnectConfiguration.PostLogoutRedirectURIs...)
	return c
}

type apiError struct {
	Message string `json:"message"`
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
			sandbox.WriteJSON(w, http.StatusUnauthorized, apiError{Message: "missing or wrong basic auth credentials"})
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
	sandbox.WriteJSON(w, http.StatusNotFound, apiError{Message: fmt.Sprintf("service provider %q not found", id)})
}

func decode(w http.ResponseWriter, r *http.Request, v any) error {
	return json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(v)
}

func (s *StandIn) handleSearch(w http.ResponseWriter, r *http.Request) {
	name, byName := r.URL.Query()["sp_name"]
	s.mu.Lock()
	defer s.mu.Unlock()
	s.totals.Inc("search")
	out := SearchResult{ServiceProviders: []ServiceProvider{}}
	var all map[string]*record
	if byName {
		all = s.sps.Find(lookupName, name[0])
	} else {
		all = s.sps.All()
	}
	recs := s.sorted(all)
	for _, rec := range recs {
		out.ServiceProviders = append(out.ServiceProviders, clone(rec.SP))
	}
	sandbox.WriteJSON(w, http.StatusOK, out)
}

func (s *StandIn) handleCreate(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	err := decode(w, r, &req)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.totals.Inc("create")
	switch {
	case err != nil:
		sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: "invalid JSON: " + err.Error()})
		return
	case strings.TrimSpace(req.Name) == "":
		sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: "sp_name is required"})
		return
	case len(req.Name) > 255:
		sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: "sp_name is longer than 255 characters"})
		return
	}
	id := newID() // 122 random bits: never taken, so nothing is read
	s.sps.Create(id, &record{
		Seq: int64(s.seq.Inc(kindServiceProvider)),
		SP: &ServiceProvider{ID: id, Name: req.Name, SSOType: SSOTypeSAML2, RedirectURIs: []string{},
			AssertionAttributes: []AssertionAttribute{}, SubjectNameIdentifier: "uid"},
		Calls: map[string]int{"create": 1},
	})
	s.createsByName.Add(req.Name, 1)
	w.Header().Set("Location", "/service/sps/"+id)
	w.WriteHeader(http.StatusCreated)
}

func (s *StandIn) handleGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.countLocked(id, "get")
	if rec == nil {
		notFound(w, id)
		return
	}
	sandbox.WriteJSON(w, http.StatusOK, clone(rec.SP))
}

func validURI(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "https" || p.Scheme == "http") && p.Host != ""
}

func (s *StandIn) handleUpdate(w http.ResponseWriter, r *http.Request) {
	var req updateRequest
	err := decode(w, r, &req)
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.countLocked(req.ID, "update")
	switch {
	case err != nil:
		sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: "invalid JSON: " + err.Error()})
		return
	case req.ID == "":
		sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: "id is required"})
		return
	case rec == nil:
		notFound(w, req.ID)
		return
	case req.SSOType != "" && req.SSOType != SSOTypeOpenIDConnect && req.SSOType != SSOTypeSAML2:
		sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: fmt.Sprintf("sso_type %q is neither %q nor %q", req.SSOType, SSOTypeOpenIDConnect, SSOTypeSAML2)})
		return
	}
	uris := append([]string{}, req.RedirectURIs...)
	if req.OpenIDConnectConfiguration != nil {
		uris = append(uris, req.OpenIDConnectConfiguration.PostLogoutRedirectURIs...)
	}
	for _, u := range uris {
		if !validURI(u) {
			sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: fmt.Sprintf("redirect URI %q is not an absolute http(s) URL", u)})
			return
		}
	}
	sp := rec.SP
	if req.SSOType != "" {
		sp.SSOType = req.SSOType
	}
	if req.OpenIDConnectConfiguration != nil {
		sp.OpenIDConnectConfiguration = OIDCConfiguration{PostLogoutRedirectURIs: append([]string{}, req.OpenIDConnectConfiguration.PostLogoutRedirectURIs...)}
	}
	if req.RedirectURIs != nil {
		sp.RedirectURIs = append([]string{}, req.RedirectURIs...)
	}
	sandbox.WriteJSON(w, http.StatusOK, clone(sp))
}

var subjectNameIdentifiers = map[string]bool{"none": true, "uid": true, "mail": true, "loginName": true, "displayName": true}

func (s *StandIn) handleRBA(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var req rbaRequest
	err := decode(w, r, &req)
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.countLocked(id, "rba")
	switch {
	case rec == nil:
		notFound(w, id)
		return
	case err != nil:
		sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: "invalid JSON: " + err.Error()})
		return
	case req.SubjectNameIdentifier != "" && !subjectNameIdentifiers[req.SubjectNameIdentifier]:
		sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: fmt.Sprintf("unknown subject_name_identifier %q", req.SubjectNameIdentifier)})
		return
	}
	for _, a := range req.AssertionAttributes {
		if a.AssertionAttributeName == "" || a.UserAttributeName == "" {
			sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: "an assertion attribute needs assertion_attribute_name and user_attribute_name"})
			return
		}
	}
	sp := rec.SP
	if req.SubjectNameIdentifier != "" {
		sp.SubjectNameIdentifier = req.SubjectNameIdentifier
	}
	if req.AssertionAttributes != nil {
		sp.AssertionAttributes = append([]AssertionAttribute{}, req.AssertionAttributes...)
	}
	if req.DefaultAuthenticatingIDP != "" {
		sp.DefaultAuthenticatingIDP = req.DefaultAuthenticatingIDP
	}
	sandbox.WriteJSON(w, http.StatusOK, clone(sp))
}

func (s *StandIn) handleDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.totals.Inc("delete")
	rec, ok := s.get(id)
	if !ok {
		notFound(w, id)
		return
	}
	s.sps.Delete(id)
	s.deletesByName.Add(rec.SP.Name, 1)
	w.WriteHeader(http.StatusNoContent)
}

func (s *StandIn) handleCreateSecret(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.countLocked(id, "createSecret")
	if rec == nil {
		notFound(w, id)
		return
	}
	secret := randomHex(24)
	rec.Secrets = append(rec.Secrets, secret)
	sandbox.WriteJSON(w, http.StatusCreated, Secret{ClientID: rec.SP.ID, ClientSecret: secret})
}

func (s *StandIn) handleDeleteSecrets(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.countLocked(id, "deleteSecrets")
	if rec == nil {
		notFound(w, id)
		return
	}
	rec.Secrets = nil
	w.WriteHeader(http.StatusNoContent)
}

// HasSecret tells whether secret is a current client secret of the service provider clientID.
func (s *StandIn) HasSecret(clientID, secret string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.get(clientID)
	if !ok {
		return false
	}
	for _, have := range rec.Secrets {
		if subtle.ConstantTimeCompare([]byte(have), []byte(secret)) == 1 {
			return true
		}
	}
	return false
}
