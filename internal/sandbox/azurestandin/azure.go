// Package azure is the sandbox stand-in for the part of Azure the broker uses for Event Hubs: a
// Microsoft Entra ID client-credentials token endpoint and Azure Resource Manager (ARM) with resource
// groups and Microsoft.EventHub namespaces in one subscription. Namespaces activate and groups delete
// after configurable delays. It keeps its state in a durable.Store (one row per resource group, its
// namespaces included, and per counter) and counts PUTs and creations per name, so tests can see
// duplicates.
package azurestandin

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
)

// Name is the path prefix the stand-in is mounted at.
const Name = "azure"

// DefaultSubscriptionID is the subscription that exists when Options.SubscriptionID is empty.
const DefaultSubscriptionID = "00000000-0000-0000-0000-000000000000"

// API versions the stand-in accepts; any other is answered 400 InvalidApiVersionParameter.
const (
	ResourceGroupsAPIVersion = "2021-04-01"
	EventHubAPIVersion       = "2021-11-01"
)

// RootRule is the one authorization rule every namespace has.
const RootRule = "RootManageSharedAccessKey"

// Provisioning states.
const (
	StateSucceeded  = "Succeeded"
	StateActivating = "Activating"
	StateDeleting   = "Deleting"
	StateAccepted   = "Accepted"
	StateFailed     = "Failed"
)

// Options configures the stand-in.
type Options struct {
	// ClientID and ClientSecret are the only credentials the token endpoint accepts.
	ClientID     string
	ClientSecret string
	// TokenTTL is the lifetime of issued tokens; one hour when zero.
	TokenTTL time.Duration
	// SubscriptionID is the only subscription that exists (others are 404 SubscriptionNotFound);
	// DefaultSubscriptionID when empty.
	SubscriptionID string
	// ActivationTime is how long a new namespace is "Activating" before it is "Succeeded"; 0 = at once.
	ActivationTime time.Duration
	// DeletionTime is how long a group is "Deleting" before it is gone with its namespaces; 0 = at once.
	DeletionTime time.Duration
	// LongRunning says which namespace creations are answered as ARM's long-running operations
	// do: 202 Accepted with no body, the Azure-AsyncOperation and Location URLs and Retry-After,
	// the namespace hidden (404) until the operation is over. LongRunningSome (the default)
	// picks about half of the namespace names, always the same ones; LongRunningAll,
	// LongRunningNone; LongRunningFail answers every creation so and lets it fail.
	LongRunning string
	// LongRunningPolls is how many reads of an operation (either URL) find it InProgress before
	// it is over; 2 when zero.
	LongRunningPolls int
	// LongRunningTime ends an operation nobody reads (its URLs were lost); 1 minute when zero.
	LongRunningTime time.Duration
	// RetryAfter is what the long-running answers ask the client to wait, in whole seconds; 10s
	// (ARM's minimum) when zero.
	RetryAfter time.Duration
	// Now returns the current time; time.Now when nil.
	Now func() time.Time
	// Store keeps the groups, namespaces and counts; Open loads them from it. New uses a new MemoryStore.
	Store durable.Store
}

// Sku is a namespace's pricing tier.
type Sku struct {
	Name     string `json:"name"`
	Tier     string `json:"tier"`
	Capacity int    `json:"capacity"`
}

// NamespaceObject is one namespace in the inspection snapshot with the calls made on it.
type NamespaceObject struct {
	Name              string            `json:"name"`
	Location          string            `json:"location"`
	Tags              map[string]string `json:"tags"`
	Sku               Sku               `json:"sku"`
	KafkaEnabled      bool              `json:"kafkaEnabled"`
	ProvisioningState string            `json:"provisioningState"`
	Calls             map[string]int    `json:"calls"`
}

// GroupObject is one resource group in the inspection snapshot with its namespaces and the calls made on it.
type GroupObject struct {
	Name              string            `json:"name"`
	Location          string            `json:"location"`
	Tags              map[string]string `json:"tags"`
	ProvisioningState string            `json:"provisioningState"`
	Namespaces        []NamespaceObject `json:"namespaces"`
	Calls             map[string]int    `json:"calls"`
}

// Objects is the inspection snapshot served at GET /_sandbox/azure/objects. Names in the counts are
// lower-cased, as Azure names are case-insensitive.
type Objects struct {
	SubscriptionID string `json:"subscriptionId"`
	// ResourceGroups lists the existing groups by name.
	ResourceGroups []GroupObject `json:"resourceGroups"`
	// GroupPutsByName and NamespacePutsByName count authorised PUTs per name, failed ones included.
	GroupPutsByName     map[string]int `json:"groupPutsByName"`
	NamespacePutsByName map[string]int `json:"namespacePutsByName"`
	// GroupCreatesByName and NamespaceCreatesByName count creations per name, deleted objects included.
	GroupCreatesByName     map[string]int `json:"groupCreatesByName"`
	NamespaceCreatesByName map[string]int `json:"namespaceCreatesByName"`
	// GroupDeletesByName counts deletions started per group name.
	GroupDeletesByName map[string]int `json:"groupDeletesByName"`
	// Calls counts token requests ("token", "token.rejected"), turned away requests ("unauthorized")
	// and authorised calls per operation ("group.put", "namespace.listKeys", ...).
	Calls map[string]int `json:"calls"`
}

// namespace is an Event Hubs namespace as the stand-in keeps it, in its group's row.
type namespace struct {
	Name      string            `json:"name"`
	Location  string            `json:"location"`
	Tags      map[string]string `json:"tags"`
	Sku       Sku               `json:"sku"`
	Kafka     bool              `json:"kafka"`
	Created   time.Time         `json:"created"`
	Updated   time.Time         `json:"updated"`
	Primary   string            `json:"primary"`
	Secondary string            `json:"secondary"`
	Calls     map[string]int    `json:"calls"`
	// Op is the long-running operation that created the namespace, nil for a synchronous creation.
	Op *asyncOp `json:"op,omitempty"`
}

// group is a resource group with its namespaces (by lower-cased name) as the stand-in keeps it; it
// is also its row in the store.
type group struct {
	Name       string                `json:"name"`
	Location   string                `json:"location"`
	Tags       map[string]string     `json:"tags"`
	Deleting   time.Time             `json:"deleting"` // zero while not being deleted
	Namespaces map[string]*namespace `json:"namespaces"`
	Calls      map[string]int        `json:"calls"`
}

// The kinds of rows in the store (row kinds, not ARM resource kinds).
const (
	rowGroup            = "group"
	rowGroupPuts        = "groupPutsByName"
	rowGroupCreates     = "groupCreatesByName"
	rowGroupDeletes     = "groupDeletesByName"
	rowNamespacePuts    = "namespacePutsByName"
	rowNamespaceCreates = "namespaceCreatesByName"
	rowTotals           = "calls"
)

// Server is the Azure stand-in; it implements sandbox.System.
type Server struct {
	opts   Options
	issuer *sandbox.TokenIssuer

	durable *durable.Durable
	handler http.Handler

	mu               sync.Mutex
	groups           *durable.Table[group] // by lower-cased name; found by namespace and while deleting
	groupPuts        *durable.Counts
	groupCreates     *durable.Counts
	groupDeletes     *durable.Counts
	namespacePuts    *durable.Counts
	namespaceCreates *durable.Counts
	totals           *durable.Counts
}

// New returns a stand-in with no resource groups that keeps its state in memory.
func New(opts Options) *Server {
	opts.Store = nil // a new MemoryStore
	return durable.InMemory(Open(context.Background(), opts))
}

// Open returns a stand-in with the resource groups, namespaces and counts kept in opts.Store.
func Open(ctx context.Context, opts Options) (*Server, error) {
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.SubscriptionID == "" {
		opts.SubscriptionID = DefaultSubscriptionID
	}
	if opts.LongRunning == "" {
		opts.LongRunning = LongRunningSome
	}
	if !slices.Contains(LongRunningModes(), opts.LongRunning) {
		return nil, fmt.Errorf("azure stand-in: long-running mode %q is not one of %s", opts.LongRunning, strings.Join(LongRunningModes(), ", "))
	}
	if opts.LongRunningPolls <= 0 {
		opts.LongRunningPolls = 2
	}
	if opts.LongRunningTime <= 0 {
		opts.LongRunningTime = time.Minute
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = 10 * time.Second
	}
	s := &Server{opts: opts}
	s.issuer = sandbox.NewTokenIssuer(opts.ClientID, opts.ClientSecret, opts.TokenTTL, opts.Now)
	s.issuer.Realm = Name
	s.issuer.Count = s.countEvents
	s.durable = durable.NewDurable(durable.Persist{Store: opts.Store, System: Name, Lock: &s.mu})
	s.groups = durable.NewTable[group](s.durable, rowGroup, false)
	s.groups.Lookup(lookupNamespace, func(g *group) []string { return slices.Sorted(maps.Keys(g.Namespaces)) })
	s.groups.Lookup(lookupOperation, func(g *group) []string {
		var ids []string
		for _, ns := range g.Namespaces {
			if ns.Op != nil {
				ids = append(ids, ns.Op.ID)
			}
		}
		slices.Sort(ids)
		return ids
	})
	s.groups.Lookup(lookupRunning, func(g *group) []string {
		for _, ns := range g.Namespaces {
			if ns.Op.running() {
				return []string{runningValue}
			}
		}
		return nil
	})
	s.groups.Lookup(lookupDeleting, func(g *group) []string {
		if g.Deleting.IsZero() {
			return nil
		}
		return []string{deletingValue}
	})
	s.groupPuts = s.durable.Counts(rowGroupPuts)
	s.groupCreates = s.durable.Counts(rowGroupCreates)
	s.groupDeletes = s.durable.Counts(rowGroupDeletes)
	s.namespacePuts = s.durable.Counts(rowNamespacePuts)
	s.namespaceCreates = s.durable.Counts(rowNamespaceCreates)
	s.totals = s.durable.Tally(rowTotals)
	if err := s.durable.Load(ctx); err != nil {
		return nil, err
	}
	s.handler = s.durable.Handler(http.HandlerFunc(s.serve))
	return s, nil
}

// Name implements sandbox.System.
func (s *Server) Name() string { return Name }

// ServeHTTP implements sandbox.System; paths are relative to /azure.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// serve routes by hand: a ServeMux cannot hold both /{tenant}/oauth2/v2.0/token and
// /subscriptions/..., and ARM paths are case-insensitive.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == "/oauth2/v2.0/token" || (strings.HasSuffix(p, "/oauth2/v2.0/token") && strings.Count(p, "/") == 4):
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			sandbox.WriteJSONCharset(w, http.StatusMethodNotAllowed, oauthError{Error: "invalid_request", ErrorDescription: "the token endpoint accepts POST only"})
			return
		}
		s.serveToken(w, r)
	case len(p) >= len("/subscriptions/") && strings.EqualFold(p[:len("/subscriptions/")], "/subscriptions/"):
		s.serveARM(w, r)
	default:
		writeError(w, http.StatusNotFound, "InvalidResourceType", "The sandbox serves no resource type at '%s'.", p)
	}
}

// Objects implements sandbox.System.
func (s *Server) Objects() any { return s.Snapshot() }

// Reset implements sandbox.System: it forgets every group, namespace and count, durably, and keeps
// issued tokens valid.
func (s *Server) Reset(ctx context.Context) error { return s.durable.Reset(ctx) }

// Lookups of the groups table.
const (
	lookupNamespace = "namespace" // lower-cased namespace names: they are global (DNS) names
	lookupDeleting  = "deleting"
	deletingValue   = "deleting"
	lookupOperation = "operation" // IDs of the long-running operations that created the namespaces
	lookupRunning   = "running"   // groups with a namespace whose operation runs
	runningValue    = "running"
)

// get returns the group with the lower-cased key; change it only to put it back.
func (s *Server) get(key string) (*group, bool) {
	g, ok := s.groups.Get(key)
	if !ok {
		return nil, false
	}
	if g.Namespaces == nil {
		g.Namespaces = map[string]*namespace{}
	}
	if g.Calls == nil {
		g.Calls = map[string]int{}
	}
	for _, ns := range g.Namespaces {
		if ns.Calls == nil {
			ns.Calls = map[string]int{}
		}
	}
	return g, true
}

// group returns the group name (nil when there is none) marked as changed, to be written before
// the answer: the caller counts a call on it.
func (s *Server) group(name string) *group {
	key := strings.ToLower(name)
	g, ok := s.get(key)
	if !ok {
		return nil
	}
	s.groups.Put(key, g)
	return g
}

func (s *Server) countEvents(events ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range events {
		s.totals.Inc(ev)
	}
}

// settle removes the groups whose deletion time is over; the caller holds s.mu. Time-driven state
// changes happen lazily, so that a test clock moves them without background goroutines.
func (s *Server) settle() {
	now := s.opts.Now()
	for key, g := range s.groups.Find(lookupDeleting, deletingValue) {
		if !g.Deleting.IsZero() && !now.Before(g.Deleting.Add(s.opts.DeletionTime)) {
			s.groups.Delete(key)
		}
	}
	for key, g := range s.groups.Find(lookupRunning, runningValue) {
		changed := false
		for _, ns := range g.Namespaces {
			if ns.Op.running() && !now.Before(ns.Op.Started.Add(s.opts.LongRunningTime)) {
				ns.Op.Ended, changed = now, true
			}
		}
		if changed {
			s.groups.Put(key, g)
		}
	}
}

func (g *group) state() string {
	if !g.Deleting.IsZero() {
		return StateDeleting
	}
	return StateSucceeded
}

func (s *Server) namespaceState(g *group, ns *namespace) string {
	switch {
	case !g.Deleting.IsZero():
		return StateDeleting
	case ns.Op.running():
		return StateAccepted
	case ns.Op != nil && ns.Op.Fail:
		return StateFailed
	case ns.Op != nil:
		return StateSucceeded // what ARM reports once the operation succeeded
	case s.opts.Now().Before(ns.Created.Add(s.opts.ActivationTime)):
		return StateActivating
	default:
		return StateSucceeded
	}
}

// findNamespace finds a namespace by name in any group: namespace names are global (DNS) names.
func (s *Server) findNamespace(name string) (*group, *namespace) {
	for key := range s.groups.Find(lookupNamespace, strings.ToLower(name)) {
		if g, ok := s.get(key); ok {
			if ns, ok := g.Namespaces[strings.ToLower(name)]; ok {
				return g, ns
			}
		}
	}
	return nil, nil
}

// Snapshot returns the inspection snapshot.
func (s *Server) Snapshot() Objects {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	out := Objects{
		SubscriptionID:         s.opts.SubscriptionID,
		ResourceGroups:         []GroupObject{},
		GroupPutsByName:        s.groupPuts.Map(),
		NamespacePutsByName:    s.namespacePuts.Map(),
		GroupCreatesByName:     s.groupCreates.Map(),
		NamespaceCreatesByName: s.namespaceCreates.Map(),
		GroupDeletesByName:     s.groupDeletes.Map(),
		Calls:                  s.totals.Map(),
	}
	all := s.groups.All()
	for _, key := range slices.Sorted(maps.Keys(all)) {
		g := all[key]
		obj := GroupObject{Name: g.Name, Location: g.Location, Tags: maps.Clone(g.Tags), ProvisioningState: g.state(),
			Namespaces: []NamespaceObject{}, Calls: maps.Clone(g.Calls)}
		for _, nkey := range slices.Sorted(maps.Keys(g.Namespaces)) {
			ns := g.Namespaces[nkey]
			obj.Namespaces = append(obj.Namespaces, NamespaceObject{Name: ns.Name, Location: ns.Location,
				Tags: maps.Clone(ns.Tags), Sku: ns.Sku, KafkaEnabled: ns.Kafka,
				ProvisioningState: s.namespaceState(g, ns), Calls: maps.Clone(ns.Calls)})
		}
		out.ResourceGroups = append(out.ResourceGroups, obj)
	}
	return out
}

func randomKey() string {
	buf := make([]byte, 32)
	_, _ = rand.Read(buf)
	return base64.StdEncoding.EncodeToString(buf)
}
