// Package directorstandin is the sandbox stand-in for the Compass Director's GraphQL API as KEB,
// the Runtime Provisioner and the Runtime Agent use it: runtimes with labels and a status
// condition, registered, updated, labelled, listed by label filter and unregistered per tenant
// (the Tenant header), and one-time tokens for the Runtime Agent, each held by a system auth of
// the runtime that can be listed and deleted as in Compass, all behind an OAuth2
// client-credentials bearer token. It serves the subset of the real schema and validates as the
// real Director does (label key pattern, label filter semantics, the refused scenarios label),
// all from internal/clients/director/directorschema. Requests are parsed and validated with
// gqlparser and answered like Compass (gqlgen): resolver errors with HTTP 200 and
// extensions.error, protocol errors with 422. It keeps its state in a durable.Store (one row per
// runtime and counter, see state.go) and counts calls per runtime and registrations per
// runtime-ID label, so tests can see duplicates.
package directorstandin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/director/directorschema"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/gql"
)

// Name is the path prefix the stand-in is mounted at.
const Name = "director"

// RuntimeIDLabel is the label KEB keys its runtimes by in the Director (the client's
// director.RuntimeIDLabel); registrations and unregistrations are counted per its value.
const RuntimeIDLabel = "kyma_runtime_id"

// Status conditions of a runtime.
const (
	ConditionInitial      = "INITIAL"
	ConditionProvisioning = "PROVISIONING"
	ConditionConnected    = "CONNECTED"
	ConditionFailed       = "FAILED"
)

// OneTimeTokenTTL is how long a one-time token is valid after it is issued, as in Compass.
const OneTimeTokenTTL = 5 * time.Minute

// Options configures the stand-in.
type Options struct {
	// ClientID and ClientSecret are the only credentials the token endpoint accepts.
	ClientID     string
	ClientSecret string
	// TokenTTL is the lifetime of issued OAuth tokens; one hour when zero.
	TokenTTL time.Duration
	// ConnectorURL is put into one-time tokens.
	ConnectorURL string
	// Now returns the current time; time.Now when nil.
	Now func() time.Time
	// Store keeps the runtimes and counts; Open loads them from it. New uses a new MemoryStore.
	Store durable.Store
}

// Status is a runtime's status condition and when it was last set.
type Status struct {
	Condition string    `json:"condition"`
	Timestamp time.Time `json:"timestamp"`
}

// Runtime is a runtime as the inspection snapshot shows it.
type Runtime struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	Description *string        `json:"description"`
	Labels      map[string]any `json:"labels"`
	Status      Status         `json:"status"`
}

// Object is one runtime in the inspection snapshot with the one-time tokens issued for it, its
// system auths and the calls made on it (by GraphQL field name).
type Object struct {
	Runtime
	// TokensIssued counts the one-time tokens ever issued for the runtime.
	TokensIssued int `json:"tokens"`
	// ValidTokens counts the runtime's system auths that are neither deleted nor expired: the
	// one-time tokens the Runtime Agent could still use.
	ValidTokens int `json:"validTokens"`
	// Auths are the runtime's system auths that are not deleted (expired ones included), in issue order.
	Auths []SystemAuth   `json:"auths"`
	Calls map[string]int `json:"calls"`
}

// SystemAuth is a system auth of a runtime holding a one-time token issued at IssuedAt and, once
// the Connector accepted it, used at UsedAt.
type SystemAuth struct {
	ID       string     `json:"id"`
	IssuedAt time.Time  `json:"issuedAt"`
	UsedAt   *time.Time `json:"usedAt,omitempty"`
}

// Objects is the inspection snapshot served at GET /_sandbox/director/objects.
type Objects struct {
	// Tenants lists the existing runtimes of each tenant in registration order.
	Tenants map[string][]Object `json:"tenants"`
	// RegistrationsByRuntimeID counts registrations per RuntimeIDLabel value, unregistered
	// runtimes included.
	RegistrationsByRuntimeID map[string]int `json:"registrationsByRuntimeID"`
	// UnregistrationsByRuntimeID counts successful unregistrations per RuntimeIDLabel value.
	UnregistrationsByRuntimeID map[string]int `json:"unregistrationsByRuntimeID"`
	// Calls counts GraphQL root fields resolved, failed ones included, token endpoint events
	// ("token", "token.rejected", "unauthorized") and requests rejected before execution
	// ("invalid").
	Calls map[string]int `json:"calls"`
	// Applications are every tenant's applications in registration order.
	Applications []Application `json:"applications"`
}

type record struct {
	seq         int64
	tenant      string
	id          string
	name        string
	description *string
	labels      map[string]any
	status      Status
	tokens      int
	auths       []SystemAuth
	tokenHashes map[string]string // system auth ID to the SHA-256 of its one-time token
	calls       map[string]int
}

// StandIn is the Director stand-in; it implements sandbox.System.
type StandIn struct {
	opts      Options
	mux       *http.ServeMux
	schema    *gql.Schema
	issuer    *sandbox.TokenIssuer
	resolvers map[string]resolver

	durable      *durable.Durable
	handler      http.Handler
	adminHandler http.Handler

	mu              sync.Mutex
	seq             *durable.Counts
	rts             *durable.Table[record] // by runtimeKey; found by system auth, token hash and runtime ID label
	apps            map[string]*application
	registrations   *durable.Counts
	unregistrations *durable.Counts
	totals          *durable.Counts
}

// New returns a stand-in without runtimes that keeps its state in memory.
func New(opts Options) *StandIn {
	opts.Store = nil // a new MemoryStore
	return durable.InMemory(Open(context.Background(), opts))
}

// Open returns a stand-in with the runtimes and counts kept in opts.Store.
func Open(ctx context.Context, opts Options) (*StandIn, error) {
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &StandIn{opts: opts}
	s.schema = gql.MustLoad("director.graphql", directorschema.SDL)
	s.issuer = sandbox.NewTokenIssuer(opts.ClientID, opts.ClientSecret, opts.TokenTTL, opts.Now)
	s.issuer.Realm = Name
	s.issuer.Count = s.countEvents
	s.resolvers = map[string]resolver{
		"registerRuntime":                   s.registerRuntime,
		"updateRuntime":                     s.updateRuntime,
		"unregisterRuntime":                 s.unregisterRuntime,
		"setRuntimeLabel":                   s.setRuntimeLabel,
		"requestOneTimeTokenForRuntime":     s.requestOneTimeToken,
		"requestOneTimeTokenForApplication": s.requestOneTimeTokenForApplication,
		"deleteSystemAuthForRuntime":        s.deleteSystemAuth,
		"runtime":                           s.runtime,
		"runtimes":                          s.runtimes,
		"applicationsForRuntime":            s.applicationsForRuntime,
	}
	s.durable = durable.NewDurable(durable.Persist{Store: opts.Store, System: Name, Lock: &s.mu, Encode: s.encode, Restore: s.restore,
		Kinds: []string{kindApplication}})
	s.openRuntimes()
	s.seq = s.durable.Counts(kindSeq)
	s.registrations = s.rts.Counts(lookupRuntimeID, "registrations", kindRegistrations)
	s.unregistrations = s.rts.Counts(lookupRuntimeID, "unregistrations", kindUnregistrations)
	s.totals = s.durable.Tally(kindTotals)
	if err := s.durable.Load(ctx); err != nil {
		return nil, err
	}
	m := http.NewServeMux()
	m.HandleFunc("POST /oauth/token", s.issuer.ServeToken)
	m.HandleFunc("POST /graphql", s.handleGraphQL)
	s.mux = m
	s.handler = s.durable.Handler(m)
	s.adminHandler = s.admin()
	return s, nil
}

// Admin implements sandbox.Administered: the application endpoints under /_sandbox/director/.
func (s *StandIn) Admin() http.Handler { return s.adminHandler }

// Name implements sandbox.System.
func (s *StandIn) Name() string { return Name }

// ServeHTTP implements sandbox.System; paths are relative to /director.
func (s *StandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Objects implements sandbox.System.
func (s *StandIn) Objects() any { return s.Snapshot() }

// Reset implements sandbox.System: it forgets every runtime and count, durably, and keeps issued
// OAuth tokens valid.
func (s *StandIn) Reset(ctx context.Context) error { return s.durable.Reset(ctx) }

// Snapshot returns the inspection snapshot.
func (s *StandIn) Snapshot() Objects {
	apps := s.Applications()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Objects{
		Applications:               apps,
		Tenants:                    map[string][]Object{},
		RegistrationsByRuntimeID:   s.registrations.Map(),
		UnregistrationsByRuntimeID: s.unregistrations.Map(),
		Calls:                      s.totals.Map(),
	}
	now := s.now()
	tenants := map[string]map[string]*record{}
	for key, rec := range s.rts.All() {
		if tenants[rec.tenant] == nil {
			tenants[rec.tenant] = map[string]*record{}
		}
		tenants[rec.tenant][key] = rec
	}
	for tenant, rts := range tenants {
		objs := make([]Object, 0, len(rts))
		for _, rec := range sorted(rts) {
			objs = append(objs, Object{Runtime: rec.snapshot(), TokensIssued: rec.tokens, ValidTokens: rec.validTokens(now),
				Auths: append([]SystemAuth{}, rec.auths...), Calls: copyCounts(rec.calls)})
		}
		out.Tenants[tenant] = objs
	}
	return out
}

func (rec *record) snapshot() Runtime {
	rt := Runtime{ID: rec.id, Name: rec.name, Labels: cloneLabels(rec.labels), Status: rec.status}
	if rec.description != nil {
		d := *rec.description
		rt.Description = &d
	}
	return rt
}

// validTokens counts the system auths whose one-time token is neither used nor expired at now.
func (rec *record) validTokens(now time.Time) int {
	n := 0
	for _, a := range rec.auths {
		if a.UsedAt == nil && now.Sub(a.IssuedAt) < OneTimeTokenTTL {
			n++
		}
	}
	return n
}

func copyCounts(in map[string]int) map[string]int {
	out := make(map[string]int, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// sorted returns the runtimes in registration order.
func sorted(rts map[string]*record) []*record {
	out := make([]*record, 0, len(rts))
	for _, rec := range rts {
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

func (s *StandIn) countEvents(events ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range events {
		s.totals.Inc(ev)
	}
}

// handleGraphQL serves POST /graphql to callers with an OAuth token (every operation) and to
// runtimes with a client certificate the sandbox CA issued (the Runtime Agent's operations on
// the runtime named by its certificate's CN), in the tenant of the Tenant header.
func (s *StandIn) handleGraphQL(w http.ResponseWriter, r *http.Request) {
	resolvers := s.resolvers
	if !s.issuer.Authorized(r) {
		runtimeID, ok := certifiedRuntime(r)
		if !ok {
			s.countEvents("unauthorized")
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			sandbox.WriteJSON(w, http.StatusUnauthorized, map[string]string{"message": "missing, unknown or expired bearer token and no client certificate of the sandbox CA"})
			return
		}
		resolvers = s.runtimeResolvers(runtimeID)
	}
	op, ok := s.schema.Decode(w, r)
	if !ok {
		s.countEvents("invalid")
		return
	}
	tenant := strings.TrimSpace(r.Header.Get("Tenant"))
	if tenant == "" {
		s.countEvents("invalid")
		sandbox.WriteJSON(w, http.StatusOK, gql.Response{Errors: []gql.Error{{Message: "Tenant is required",
			Extensions: map[string]any{"error": gql.KindTenantRequired}}}})
		return
	}
	s.mu.Lock()
	resp := s.execute(tenant, op, resolvers)
	s.mu.Unlock()
	sandbox.WriteJSON(w, http.StatusOK, resp)
}

func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// certifiedRuntime is the runtime ID (CN) of the request's verified client certificate.
func certifiedRuntime(r *http.Request) (string, bool) {
	cert, ok := sandbox.ClientCertificate(r)
	if !ok || cert.Subject.CommonName == "" {
		return "", false
	}
	return cert.Subject.CommonName, true
}
