// Package servicemanager is the sandbox stand-in for SAP Service Manager (SM) REST API v1 as the broker
// uses it to provision and bind Enterprise Messaging: a UAA-like OAuth2 client-credentials token
// endpoint, the service offering and plan catalog, service instances created and deleted
// asynchronously (with operations that stay "in progress" for a configurable time) and service
// bindings with EMS-like credentials. It keeps its state in a durable.Store (one row per instance,
// binding, operation and counter) and counts calls per object and creations per name, so tests can
// see duplicates.
package smstandin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
)

// Name is the path prefix the stand-in is mounted at.
const Name = "servicemanager"

// Operation states and types.
const (
	StateInProgress = "in progress"
	StateSucceeded  = "succeeded"
	StateFailed     = "failed"

	OperationCreate = "create"
	OperationDelete = "delete"
)

// Catalog names of what the stand-in offers.
const (
	OfferingEnterpriseMessaging = "enterprise-messaging"
	PlanDefault                 = "default"
	OfferingServiceManager      = "service-manager"
	PlanServiceOperatorAccess   = "service-operator-access"
)

// Offering is a service offering as the API returns it.
type Offering struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	CatalogID   string `json:"catalog_id"`
	CatalogName string `json:"catalog_name"`
	Description string `json:"description"`
	Bindable    bool   `json:"bindable"`
	Ready       bool   `json:"ready"`
	BrokerID    string `json:"broker_id"`
}

// Plan is a service plan as the API returns it.
type Plan struct {
	ID                string `json:"id"`
	Name              string `json:"name"`
	CatalogID         string `json:"catalog_id"`
	CatalogName       string `json:"catalog_name"`
	ServiceOfferingID string `json:"service_offering_id"`
	Description       string `json:"description"`
	Bindable          bool   `json:"bindable"`
	Free              bool   `json:"free"`
	Ready             bool   `json:"ready"`
}

// Operation is an asynchronous operation on an instance as the API returns it.
type Operation struct {
	ID           string    `json:"id"`
	Type         string    `json:"type"`
	State        string    `json:"state"`
	ResourceID   string    `json:"resource_id"`
	ResourceType string    `json:"resource_type"`
	Description  string    `json:"description,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// Instance is a service instance as the API returns it.
type Instance struct {
	ID            string              `json:"id"`
	Name          string              `json:"name"`
	ServicePlanID string              `json:"service_plan_id"`
	PlatformID    string              `json:"platform_id"`
	Ready         bool                `json:"ready"`
	Usable        bool                `json:"usable"`
	Labels        map[string][]string `json:"labels,omitempty"`
	LastOperation *Operation          `json:"last_operation,omitempty"`
	CreatedAt     time.Time           `json:"created_at"`
	UpdatedAt     time.Time           `json:"updated_at"`
}

// Binding is a service binding as the API returns it.
type Binding struct {
	ID                string         `json:"id"`
	Name              string         `json:"name"`
	ServiceInstanceID string         `json:"service_instance_id"`
	Ready             bool           `json:"ready"`
	Credentials       map[string]any `json:"credentials"`
	CreatedAt         time.Time      `json:"created_at"`
	UpdatedAt         time.Time      `json:"updated_at"`
}

// List is the answer of a list request.
type List[T any] struct {
	NumItems int `json:"num_items"`
	Items    []T `json:"items"`
}

// Options configures the stand-in.
type Options struct {
	// ClientID and ClientSecret are the only credentials the token endpoint accepts.
	ClientID     string
	ClientSecret string
	// TokenTTL is the lifetime of issued tokens; one hour when zero.
	TokenTTL time.Duration
	// ProvisionDelay is how long an asynchronous creation or deletion of an instance stays
	// "in progress", measured with Now; zero finishes it at once.
	ProvisionDelay time.Duration
	// Now returns the current time; time.Now when nil.
	Now func() time.Time
	// Store keeps the instances, bindings, operations and counts; Open loads them from it. New uses
	// a new MemoryStore.
	Store durable.Store
}

// InstanceObject is one instance in the inspection snapshot, with its parameters, the ids of its
// bindings and the calls made on it.
type InstanceObject struct {
	Instance
	Parameters map[string]any `json:"parameters,omitempty"`
	Bindings   []string       `json:"bindings"`
	Calls      map[string]int `json:"calls"`
}

// BindingObject is one binding in the inspection snapshot with the calls made on it.
type BindingObject struct {
	Binding
	Calls map[string]int `json:"calls"`
}

// Objects is the inspection snapshot served at GET /_sandbox/servicemanager/objects.
type Objects struct {
	// Instances lists the existing instances (those being deleted included) by name.
	Instances []InstanceObject `json:"instances"`
	// Bindings lists the existing bindings by name.
	Bindings []BindingObject `json:"bindings"`
	// InstanceCreatesByName and BindingCreatesByName count successful creations per name, deleted
	// ones included; a creation answered 409 does not count.
	InstanceCreatesByName map[string]int `json:"instanceCreatesByName"`
	BindingCreatesByName  map[string]int `json:"bindingCreatesByName"`
	// InstanceDeletesByName and BindingDeletesByName count finished deletions per name.
	InstanceDeletesByName map[string]int `json:"instanceDeletesByName"`
	BindingDeletesByName  map[string]int `json:"bindingDeletesByName"`
	// Calls counts calls per operation: authorised API calls, including those that failed, and
	// "token", "token.rejected" and "unauthorized".
	Calls map[string]int `json:"calls"`
}

// instance is a service instance as the stand-in keeps it; it is also its row in the store.
type instance struct {
	Instance
	Parameters map[string]any `json:"parameters"`
	DoneAt     time.Time      `json:"doneAt"` // when the operation in progress finishes
	Calls      map[string]int `json:"calls"`
}

// binding is a service binding as the stand-in keeps it; it is also its row in the store.
type binding struct {
	Binding                // Credentials stays nil: they are kept in creds
	Calls   map[string]int `json:"calls"`
	// creds are the credentials, kept encoded: as nested maps they cost several KB per binding,
	// and only a read of the binding needs them decoded.
	creds json.RawMessage
}

// storedBinding is a binding's row: the API's binding with its credentials, and the call counts.
type storedBinding struct {
	Binding
	Credentials json.RawMessage `json:"credentials"`
	Calls       map[string]int  `json:"calls"`
}

func (b *binding) MarshalJSON() ([]byte, error) {
	return json.Marshal(storedBinding{Binding: b.Binding, Credentials: b.creds, Calls: b.Calls})
}

func (b *binding) UnmarshalJSON(data []byte) error {
	var st storedBinding
	if err := json.Unmarshal(data, &st); err != nil {
		return err
	}
	b.Binding, b.creds, b.Calls = st.Binding, st.Credentials, st.Calls
	b.Credentials = nil
	return nil
}

// The kinds of rows in the store.
const (
	kindInstance        = "instance"
	kindBinding         = "binding"
	kindOperation       = "operation"
	kindInstanceCreates = "instanceCreatesByName"
	kindBindingCreates  = "bindingCreatesByName"
	kindInstanceDeletes = "instanceDeletesByName"
	kindBindingDeletes  = "bindingDeletesByName"
	kindTotals          = "calls"

	lookupName     = "name"
	lookupSettling = "settling"
	lookupInstance = "instance"
	settlingValue  = "inProgress"
)

// Server is the Service Manager stand-in; it implements sandbox.System.
type Server struct {
	opts      Options
	mux       *http.ServeMux
	issuer    *sandbox.TokenIssuer
	offerings []Offering
	plans     []Plan

	durable *durable.Durable
	handler http.Handler

	mu sync.Mutex
	// instances are found by name and, when their last operation is in progress (settling), by
	// lookupSettling: settle looks only at them, not at every instance, on every request.
	instances             *durable.Table[instance]
	bindings              *durable.Table[binding]   // found by instance
	operations            *durable.Table[Operation] // by id; kept after the instance is gone
	instanceCreatesByName *durable.Counts
	bindingCreatesByName  *durable.Counts
	instanceDeletesByName *durable.Counts
	bindingDeletesByName  *durable.Counts
	totals                *durable.Counts
}

// New returns a stand-in with the catalog and no instances that keeps its state in memory.
func New(opts Options) *Server {
	opts.Store = nil // a new MemoryStore
	return durable.InMemory(Open(context.Background(), opts))
}

// Open returns a stand-in with the catalog and the instances, bindings, operations and counts kept
// in opts.Store.
func Open(ctx context.Context, opts Options) (*Server, error) {
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{opts: opts}
	s.issuer = sandbox.NewTokenIssuer(opts.ClientID, opts.ClientSecret, opts.TokenTTL, opts.Now)
	s.issuer.Realm = Name
	s.issuer.Count = s.countEvents
	s.offerings, s.plans = catalog()
	s.durable = durable.NewDurable(durable.Persist{Store: opts.Store, System: Name, Lock: &s.mu})
	s.instances = durable.NewTable[instance](s.durable, kindInstance, false)
	s.instances.Lookup(lookupName, func(in *instance) []string { return []string{in.Name} })
	s.instances.Lookup(lookupSettling, func(in *instance) []string {
		if in.LastOperation != nil && in.LastOperation.State == StateInProgress {
			return []string{settlingValue}
		}
		return nil
	})
	s.bindings = durable.NewTable[binding](s.durable, kindBinding, false)
	s.bindings.Lookup(lookupInstance, func(b *binding) []string { return []string{b.ServiceInstanceID} })
	s.operations = durable.NewTable[Operation](s.durable, kindOperation, false)
	s.instanceCreatesByName = s.instances.Counts(lookupName, "creates", kindInstanceCreates)
	s.bindingCreatesByName = s.durable.Counts(kindBindingCreates)
	s.instanceDeletesByName = s.instances.Counts(lookupName, "deletes", kindInstanceDeletes)
	s.bindingDeletesByName = s.durable.Counts(kindBindingDeletes)
	s.totals = s.durable.Tally(kindTotals)
	if err := s.durable.Load(ctx); err != nil {
		return nil, err
	}
	m := http.NewServeMux()
	m.HandleFunc("POST /oauth/token", s.issuer.ServeToken)
	m.HandleFunc("GET /v1/service_offerings", s.issuer.Protect(s.handleListOfferings))
	m.HandleFunc("GET /v1/service_plans", s.issuer.Protect(s.handleListPlans))
	m.HandleFunc("GET /v1/service_instances", s.issuer.Protect(s.handleListInstances))
	m.HandleFunc("POST /v1/service_instances", s.issuer.Protect(s.handleCreateInstance))
	m.HandleFunc("GET /v1/service_instances/{id}", s.issuer.Protect(s.handleGetInstance))
	m.HandleFunc("DELETE /v1/service_instances/{id}", s.issuer.Protect(s.handleDeleteInstance))
	m.HandleFunc("GET /v1/service_instances/{id}/operations/{op}", s.issuer.Protect(s.handleGetOperation))
	m.HandleFunc("GET /v1/service_bindings", s.issuer.Protect(s.handleListBindings))
	m.HandleFunc("POST /v1/service_bindings", s.issuer.Protect(s.handleCreateBinding))
	m.HandleFunc("GET /v1/service_bindings/{id}", s.issuer.Protect(s.handleGetBinding))
	m.HandleFunc("DELETE /v1/service_bindings/{id}", s.issuer.Protect(s.handleDeleteBinding))
	s.mux = m
	s.handler = s.durable.Handler(m)
	return s, nil
}

// catalog is what the stand-in offers; fixed ids keep runs comparable.
func catalog() ([]Offering, []Plan) {
	const broker = "0e4d7b2c-5a61-4f0e-9a3e-000000000b01"
	em := Offering{ID: "0e4d7b2c-5a61-4f0e-9a3e-000000000e01", Name: OfferingEnterpriseMessaging, CatalogID: "sandbox-em",
		CatalogName: OfferingEnterpriseMessaging, Description: "SAP Event Mesh (sandbox)", Bindable: true, Ready: true, BrokerID: broker}
	sm := Offering{ID: "0e4d7b2c-5a61-4f0e-9a3e-000000000e02", Name: OfferingServiceManager, CatalogID: "sandbox-sm",
		CatalogName: OfferingServiceManager, Description: "Service Manager (sandbox)", Bindable: true, Ready: true, BrokerID: broker}
	return []Offering{em, sm}, []Plan{
		{ID: "0e4d7b2c-5a61-4f0e-9a3e-000000000a01", Name: PlanDefault, CatalogID: "sandbox-em-default", CatalogName: PlanDefault,
			ServiceOfferingID: em.ID, Description: "Event Mesh default plan", Bindable: true, Ready: true},
		{ID: "0e4d7b2c-5a61-4f0e-9a3e-000000000a02", Name: PlanServiceOperatorAccess, CatalogID: "sandbox-sm-operator",
			CatalogName: PlanServiceOperatorAccess, ServiceOfferingID: sm.ID, Description: "Service operator access", Bindable: true, Free: true, Ready: true},
	}
}

// Name implements sandbox.System.
func (s *Server) Name() string { return Name }

// ServeHTTP implements sandbox.System; paths are relative to /servicemanager.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Objects implements sandbox.System.
func (s *Server) Objects() any { return s.Snapshot() }

// Reset implements sandbox.System: it forgets every instance, binding, operation and count,
// durably, and keeps the catalog and the issued tokens.
func (s *Server) Reset(ctx context.Context) error { return s.durable.Reset(ctx) }

// instance returns the instance id; change it only to put it back.
func (s *Server) instance(id string) (*instance, bool) {
	in, ok := s.instances.Get(id)
	if ok && in.Calls == nil {
		in.Calls = map[string]int{}
	}
	return in, ok
}

// binding returns the binding id; change it only to put it back.
func (s *Server) binding(id string) (*binding, bool) {
	b, ok := s.bindings.Get(id)
	if ok && b.Calls == nil {
		b.Calls = map[string]int{}
	}
	return b, ok
}

// putInstance stores the instance and its last operation, which is kept by ID too.
func (s *Server) putInstance(in *instance) {
	s.instances.Put(in.ID, in)
	if op := in.LastOperation; op != nil {
		c := *op
		s.operations.Put(op.ID, &c)
	}
}

// selected returns the objects of t meeting crit, through the lookup of the first criterion on a
// looked-up field, else by scanning them all.
func selected[T any](t *durable.Table[T], crit []criterion, lookups map[string]string) map[string]*T {
	for _, c := range crit {
		if l, ok := lookups[c.field]; ok {
			return t.Find(l, c.value)
		}
	}
	return t.All()
}

// Snapshot returns the inspection snapshot, operations due by now finished.
func (s *Server) Snapshot() Objects {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	out := Objects{
		Instances:             []InstanceObject{},
		Bindings:              []BindingObject{},
		InstanceCreatesByName: s.instanceCreatesByName.Map(),
		BindingCreatesByName:  s.bindingCreatesByName.Map(),
		InstanceDeletesByName: s.instanceDeletesByName.Map(),
		BindingDeletesByName:  s.bindingDeletesByName.Map(),
		Calls:                 s.totals.Map(),
	}
	for _, in := range s.instances.All() {
		params, _ := deepCopy(in.Parameters).(map[string]any)
		out.Instances = append(out.Instances, InstanceObject{Instance: in.view(), Parameters: params,
			Bindings: s.bindingIDs(in.ID), Calls: copyCounts(in.Calls)})
	}
	sort.Slice(out.Instances, func(i, j int) bool {
		a, b := out.Instances[i], out.Instances[j]
		return a.Name < b.Name || a.Name == b.Name && a.ID < b.ID
	})
	for _, b := range s.bindings.All() {
		out.Bindings = append(out.Bindings, BindingObject{Binding: b.view(), Calls: copyCounts(b.Calls)})
	}
	sort.Slice(out.Bindings, func(i, j int) bool {
		a, b := out.Bindings[i], out.Bindings[j]
		return a.Name < b.Name || a.Name == b.Name && a.ID < b.ID
	})
	return out
}

// bindingIDs lists the ids of the instance's bindings, sorted; s.mu must be held.
func (s *Server) bindingIDs(instanceID string) []string {
	ids := []string{}
	for _, b := range s.bindings.Find(lookupInstance, instanceID) {
		ids = append(ids, b.ID)
	}
	sort.Strings(ids)
	return ids
}

// settle finishes the operations due by now; s.mu must be held. Doing it lazily on every request
// makes the progress follow Options.Now without a background goroutine.
func (s *Server) settle() {
	now := s.opts.Now()
	for id, in := range s.instances.Find(lookupSettling, settlingValue) {
		op := in.LastOperation
		if op == nil || op.State != StateInProgress || now.Before(in.DoneAt) {
			continue
		}
		op.State, op.UpdatedAt = StateSucceeded, in.DoneAt
		switch op.Type {
		case OperationCreate:
			in.Ready, in.Usable, in.UpdatedAt = true, true, in.DoneAt
			s.putInstance(in)
		case OperationDelete:
			s.putInstance(in)
			s.instances.Delete(id)
			s.instanceDeletesByName.Add(in.Name, 1)
		}
	}
}

// view is the instance as the API returns it, sharing nothing with the stored one.
func (in *instance) view() Instance {
	v := in.Instance
	if in.Labels != nil {
		v.Labels = make(map[string][]string, len(in.Labels))
		for k, vals := range in.Labels {
			v.Labels[k] = append([]string{}, vals...)
		}
	}
	if in.LastOperation != nil {
		op := *in.LastOperation
		v.LastOperation = &op
	}
	return v
}

func (b *binding) view() Binding {
	v := b.Binding
	_ = json.Unmarshal(b.creds, &v.Credentials) // encoded by this stand-in from a map
	return v
}

// deepCopy copies a decoded JSON value.
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return v
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return v
	}
}

func copyCounts(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (s *Server) countEvents(events ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range events {
		s.totals.Inc(ev)
	}
}

// apiError is Service Manager's error body.
type apiError struct {
	Error       string `json:"error"`
	Description string `json:"description"`
}

// fail answers status with an error body; code is Service Manager's error name.
func fail(w http.ResponseWriter, status int, code, format string, args ...any) {
	sandbox.WriteJSON(w, status, apiError{Error: code, Description: fmt.Sprintf(format, args...)})
}

func badRequest(w http.ResponseWriter, format string, args ...any) {
	fail(w, http.StatusBadRequest, "BadRequest", format, args...)
}

func notFound(w http.ResponseWriter, kind, id string) {
	fail(w, http.StatusNotFound, "NotFound", "could not find such %s %q", kind, id)
}
