// Package edpstandin is the sandbox stand-in for SAP's Event Data Platform (EDP) as the broker calls
// it (internal/clients/edp/testdata/contract.json): an OAuth2 client-credentials token endpoint that
// requires the scopes edp-namespace.read and edp-namespace.update, and the data tenant API of a
// namespace, where a runtime is registered as the data tenant <subaccount ID>/<environment> with its
// secret and string metadata (maasConsumerEnvironment, maasConsumerServicePlan, ...). It rejects what
// EDP would not take from the broker: another content type, a tenant without its secret, unknown
// fields, unknown maasConsumerEnvironment and maasConsumerServicePlan values, an existing metadata key
// (409).
// It keeps its state in a durable.Store (one row per data tenant and counter) and counts calls per
// data tenant and creations per data tenant, so tests can see duplicates.
package edpstandin

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
)

// Name is the path prefix the stand-in is mounted at.
const Name = "edp"

// Namespace is a data tenant's namespace as the API returns it.
type Namespace struct {
	Name string `json:"name"`
}

// DataTenant is a data tenant as the API returns it.
type DataTenant struct {
	Namespace   Namespace `json:"namespace"`
	Name        string    `json:"name"`
	Environment string    `json:"environment"`
	CreatedAt   int64     `json:"createdAt"`
}

// MetadataItem is one metadata entry as the API returns it.
type MetadataItem struct {
	DataTenant DataTenant `json:"dataTenant"`
	Key        string     `json:"key"`
	Value      string     `json:"value"`
}

// dataTenantRequest is the body of POST /namespaces/{namespace}/dataTenants.
type dataTenantRequest struct {
	Name        string `json:"name"`
	Environment string `json:"environment"`
	Secret      string `json:"secret"`
}

// Scopes are the scopes a token request must ask for.
var Scopes = []string{"edp-namespace.read", "edp-namespace.update"}

// The metadata keys whose values the stand-in checks, and their values.
const (
	KeyConsumerEnvironment = "maasConsumerEnvironment"
	KeyConsumerServicePlan = "maasConsumerServicePlan"
)

var metadataValues = map[string]map[string]bool{
	KeyConsumerEnvironment: {"CF": true, "KUBERNETES": true, "NEO": true},
	KeyConsumerServicePlan: {"free": true, "tdd": true, "standard": true},
}

// metadataRequest is the body of POST .../dataTenants/{name}/{environment}/metadata.
type metadataRequest struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Options configures the stand-in.
type Options struct {
	// ClientID and ClientSecret are the only credentials the token endpoint accepts.
	ClientID     string
	ClientSecret string
	// TokenTTL is the lifetime of issued tokens; one hour when zero.
	TokenTTL time.Duration
	// Namespaces are the namespaces that exist; requests for any other get 404. When empty, every
	// namespace exists.
	Namespaces []string
	// Now returns the current time; time.Now when nil.
	Now func() time.Time
	// Store keeps the data tenants and counts; Open loads them from it. New uses a new MemoryStore.
	Store durable.Store
}

// Object is one data tenant in the inspection snapshot, with its metadata and the calls made on it.
type Object struct {
	DataTenant
	Metadata map[string]string `json:"metadata"`
	Calls    map[string]int    `json:"calls"`
}

// Objects is the inspection snapshot served at GET /_sandbox/edp/objects.
type Objects struct {
	// DataTenants lists the existing data tenants by namespace, name and environment.
	DataTenants []Object `json:"dataTenants"`
	// CreatesByTenant counts successful creations per "<namespace>/<name>/<environment>", deleted ones
	// included; a create answered 409 does not count.
	CreatesByTenant map[string]int `json:"createsByTenant"`
	// DeletesByTenant counts successful deletions per "<namespace>/<name>/<environment>".
	DeletesByTenant map[string]int `json:"deletesByTenant"`
	// Calls counts authorised calls per operation, including those that failed.
	Calls map[string]int `json:"calls"`
}

// tenant is a data tenant with its metadata and calls as the stand-in keeps it; it is also its
// row in the store.
type tenant = Object

// decodeJSON decodes the JSON body of r into v, refusing other content types (415) and unknown
// fields; it answers the refusal itself and returns false then.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		sandbox.WriteJSON(w, http.StatusUnsupportedMediaType, apiError{Message: fmt.Sprintf("content type %q: the body must be application/json", r.Header.Get("Content-Type"))})
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: "invalid JSON: " + err.Error()})
		return false
	}
	return true
}

// The kinds of rows in the store.
const (
	kindDataTenant = "dataTenant"
	kindCreates    = "createsByTenant"
	kindDeletes    = "deletesByTenant"
	kindTotals     = "calls"
)

// StandIn is the EDP stand-in; it implements sandbox.System.
type StandIn struct {
	opts       Options
	namespaces map[string]bool
	mux        *http.ServeMux

	issuer *sandbox.TokenIssuer

	durable *durable.Durable
	handler http.Handler

	mu              sync.Mutex
	tenants         *durable.Table[tenant] // by tenantKey
	createsByTenant *durable.Counts
	deletesByTenant *durable.Counts
	totals          *durable.Counts
}

// New returns a stand-in without data tenants that keeps its state in memory.
func New(opts Options) *StandIn {
	opts.Store = nil // a new MemoryStore
	return durable.InMemory(Open(context.Background(), opts))
}

// Open returns a stand-in with the data tenants and counts kept in opts.Store.
func Open(ctx context.Context, opts Options) (*StandIn, error) {
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &StandIn{opts: opts}
	s.issuer = sandbox.NewTokenIssuer(opts.ClientID, opts.ClientSecret, opts.TokenTTL, opts.Now)
	s.issuer.Realm = Name
	s.issuer.Count = s.countEvents
	if len(opts.Namespaces) > 0 {
		s.namespaces = map[string]bool{}
		for _, ns := range opts.Namespaces {
			s.namespaces[ns] = true
		}
	}
	s.durable = durable.NewDurable(durable.Persist{Store: opts.Store, System: Name, Lock: &s.mu})
	s.tenants = durable.NewTable[tenant](s.durable, kindDataTenant, false)
	s.createsByTenant = s.durable.Counts(kindCreates)
	s.deletesByTenant = s.durable.Counts(kindDeletes)
	s.totals = s.durable.Tally(kindTotals)
	if err := s.durable.Load(ctx); err != nil {
		return nil, err
	}
	m := http.NewServeMux()
	m.HandleFunc("POST /oauth/token", s.handleToken)
	const base = "/namespaces/{namespace}/dataTenants"
	const one = base + "/{name}/{environment}"
	m.HandleFunc("POST "+base, s.issuer.Protect(s.handleCreate))
	m.HandleFunc("GET "+one, s.issuer.Protect(s.handleGet))
	m.HandleFunc("DELETE "+one, s.issuer.Protect(s.handleDelete))
	m.HandleFunc("POST "+one+"/metadata", s.issuer.Protect(s.handleSetMetadata))
	m.HandleFunc("GET "+one+"/metadata", s.issuer.Protect(s.handleListMetadata))
	m.HandleFunc("DELETE "+one+"/metadata/{key}", s.issuer.Protect(s.handleDeleteMetadata))
	s.mux = m
	s.handler = s.durable.Handler(m)
	return s, nil
}

// Name implements sandbox.System.
func (s *StandIn) Name() string { return Name }

// ServeHTTP implements sandbox.System; paths are relative to /edp.
func (s *StandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Objects implements sandbox.System.
func (s *StandIn) Objects() any { return s.Snapshot() }

// Reset implements sandbox.System: it forgets every data tenant and count, durably, and keeps
// issued tokens valid.
func (s *StandIn) Reset(ctx context.Context) error { return s.durable.Reset(ctx) }

// get returns the data tenant with key; change it only to put it back.
func (s *StandIn) get(key string) (*tenant, bool) {
	t, ok := s.tenants.Get(key)
	if ok {
		if t.Metadata == nil {
			t.Metadata = map[string]string{}
		}
		if t.Calls == nil {
			t.Calls = map[string]int{}
		}
	}
	return t, ok
}

// Snapshot returns the inspection snapshot.
func (s *StandIn) Snapshot() Objects {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Objects{
		DataTenants:     []Object{},
		CreatesByTenant: s.createsByTenant.Map(),
		DeletesByTenant: s.deletesByTenant.Map(),
		Calls:           s.totals.Map(),
	}
	for _, t := range s.tenants.All() {
		md := make(map[string]string, len(t.Metadata))
		for k, v := range t.Metadata {
			md[k] = v
		}
		calls := make(map[string]int, len(t.Calls))
		for k, v := range t.Calls {
			calls[k] = v
		}
		out.DataTenants = append(out.DataTenants, Object{DataTenant: t.DataTenant, Metadata: md, Calls: calls})
	}
	sort.Slice(out.DataTenants, func(i, j int) bool {
		return tenantKey(out.DataTenants[i].Namespace.Name, out.DataTenants[i].Name, out.DataTenants[i].Environment) <
			tenantKey(out.DataTenants[j].Namespace.Name, out.DataTenants[j].Name, out.DataTenants[j].Environment)
	})
	return out
}

func tenantKey(namespace, name, environment string) string {
	return namespace + "/" + name + "/" + environment
}

type apiError struct {
	Message string `json:"message"`
}

func (s *StandIn) countEvents(events ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range events {
		s.totals.Inc(ev)
	}
}

// namespaceExists answers 404 for an unknown namespace; s.mu must be held.
func (s *StandIn) namespaceExists(w http.ResponseWriter, ns string) bool {
	if s.namespaces != nil && !s.namespaces[ns] {
		sandbox.WriteJSON(w, http.StatusNotFound, apiError{Message: fmt.Sprintf("namespace %q not found", ns)})
		return false
	}
	return true
}

// lookup counts op and finds the data tenant addressed by the path, answering 404 when the namespace
// or the data tenant does not exist; s.mu must be held.
func (s *StandIn) lookup(w http.ResponseWriter, r *http.Request, op string) (*tenant, bool) {
	s.totals.Inc(op)
	ns, name, env := r.PathValue("namespace"), r.PathValue("name"), r.PathValue("environment")
	if !s.namespaceExists(w, ns) {
		return nil, false
	}
	t, ok := s.get(tenantKey(ns, name, env))
	if !ok {
		sandbox.WriteJSON(w, http.StatusNotFound, apiError{Message: fmt.Sprintf("data tenant %s/%s not found in namespace %q", name, env, ns)})
		return nil, false
	}
	t.Calls[op]++
	s.tenants.Put(tenantKey(ns, name, env), t)
	return t, true
}

// handleToken serves tokens to requests for the scopes the broker's namespace client has.
func (s *StandIn) handleToken(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
	if err := r.ParseForm(); err == nil {
		asked := map[string]bool{}
		for _, sc := range strings.Fields(r.PostForm.Get("scope")) {
			asked[sc] = true
		}
		for _, want := range Scopes {
			if !asked[want] {
				s.countEvents("invalid_scope")
				sandbox.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_scope",
					"error_description": fmt.Sprintf("the token request must ask for the scopes %s", strings.Join(Scopes, " "))})
				return
			}
		}
	}
	s.issuer.ServeToken(w, r)
}

func (s *StandIn) handleCreate(w http.ResponseWriter, r *http.Request) {
	s.countEvents("create")
	var req dataTenantRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	ns := r.PathValue("namespace")
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !s.namespaceExists(w, ns):
		return
	case strings.TrimSpace(req.Name) == "" || strings.TrimSpace(req.Environment) == "":
		sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: "name and environment are required"})
		return
	case req.Secret == "":
		sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: "secret is required"})
		return
	case strings.Contains(req.Name, "/") || strings.Contains(req.Environment, "/"):
		sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: "name and environment must not contain '/'"})
		return
	}
	key := tenantKey(ns, req.Name, req.Environment)
	if t, ok := s.get(key); ok {
		t.Calls["create"]++
		s.tenants.Put(key, t)
		sandbox.WriteJSON(w, http.StatusConflict, apiError{Message: fmt.Sprintf("data tenant %s/%s already exists in namespace %q", req.Name, req.Environment, ns)})
		return
	}
	t := &tenant{
		DataTenant: DataTenant{Namespace: Namespace{Name: ns}, Name: req.Name, Environment: req.Environment,
			CreatedAt: s.opts.Now().UnixMilli()},
		Metadata: map[string]string{},
		Calls:    map[string]int{"create": 1},
	}
	s.tenants.Put(key, t)
	s.createsByTenant.Inc(key)
	sandbox.WriteJSON(w, http.StatusCreated, t.DataTenant)
}

func (s *StandIn) handleGet(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.lookup(w, r, "get")
	if !ok {
		return
	}
	sandbox.WriteJSON(w, http.StatusOK, t.DataTenant)
}

func (s *StandIn) handleDelete(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.lookup(w, r, "delete")
	if !ok {
		return
	}
	key := tenantKey(t.Namespace.Name, t.Name, t.Environment)
	s.tenants.Delete(key)
	s.deletesByTenant.Inc(key)
	w.WriteHeader(http.StatusNoContent)
}

func (s *StandIn) handleSetMetadata(w http.ResponseWriter, r *http.Request) {
	var req metadataRequest
	if !decodeJSON(w, r, &req) {
		s.countEvents("metadata.set")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.lookup(w, r, "metadata.set")
	if !ok {
		return
	}
	switch {
	case strings.TrimSpace(req.Key) == "":
		sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: "key is required"})
		return
	case strings.Contains(req.Key, "/"):
		sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: "key must not contain '/'"})
		return
	}
	if allowed, checked := metadataValues[req.Key]; checked && !allowed[req.Value] {
		sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: fmt.Sprintf("%s %q is not one of the known values", req.Key, req.Value)})
		return
	}
	if _, exists := t.Metadata[req.Key]; exists {
		sandbox.WriteJSON(w, http.StatusConflict, apiError{Message: fmt.Sprintf("metadata %q already exists", req.Key)})
		return
	}
	t.Metadata[req.Key] = req.Value
	sandbox.WriteJSON(w, http.StatusCreated, MetadataItem{DataTenant: t.DataTenant, Key: req.Key, Value: req.Value})
}

func (s *StandIn) handleListMetadata(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.lookup(w, r, "metadata.list")
	if !ok {
		return
	}
	out := make([]MetadataItem, 0, len(t.Metadata))
	for k, v := range t.Metadata {
		out = append(out, MetadataItem{DataTenant: t.DataTenant, Key: k, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	sandbox.WriteJSON(w, http.StatusOK, out)
}

func (s *StandIn) handleDeleteMetadata(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.lookup(w, r, "metadata.delete")
	if !ok {
		return
	}
	key := r.PathValue("key")
	if _, exists := t.Metadata[key]; !exists {
		sandbox.WriteJSON(w, http.StatusNotFound, apiError{Message: fmt.Sprintf("metadata %q not found", key)})
		return
	}
	delete(t.Metadata, key)
	w.WriteHeader(http.StatusNoContent)
}
