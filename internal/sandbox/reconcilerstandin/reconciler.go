// Package reconciler is the sandbox stand-in for the Kyma Reconciler mothership API (v1) as the broker
// uses it: clusters are created or reconfigured with POST/PUT /v1/clusters, polled with
// GET /v1/clusters/{runtimeID}/status and deleted with DELETE /v1/clusters/{runtimeID}. Reconciliation
// and deletion progress through their statuses as time passes; the status is derived from timestamps
// when read, so nothing runs in the background. Like the real API it has no authentication. It keeps
// its state in a durable.Store (one row per cluster and counter).
package reconcilerstandin

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
)

// Name is the path prefix the stand-in is mounted at.
const Name = "reconciler"

// Statuses of a cluster.
const (
	StatusReconcilePending  = "reconcile_pending"
	StatusReconciling       = "reconciling"
	StatusReady             = "ready"
	StatusError             = "error"
	StatusReconcileDisabled = "reconcile_disabled"
	StatusDeletePending     = "delete_pending"
	StatusDeleting          = "deleting"
	StatusDeleted           = "deleted"
	StatusDeleteError       = "delete_error"
	// The reconciliation or deletion failed and the Reconciler retries it by itself.
	StatusReconcileErrorRetryable = "reconcile_error_retryable"
	StatusDeleteErrorRetryable    = "delete_error_retryable"
)

// Configuration is one configuration entry of a component; Value is any JSON value (numbers are kept
// as json.Number, so they compare and echo exactly).
type Configuration struct {
	Key    string `json:"key"`
	Value  any    `json:"value"`
	Secret bool   `json:"secret"`
}

// Component is a Kyma component to install.
type Component struct {
	URL           string          `json:"URL"`
	Component     string          `json:"component"`
	Namespace     string          `json:"namespace"`
	Version       string          `json:"version"`
	Configuration []Configuration `json:"configuration"`
}

// KymaConfig is the Kyma installation of a cluster.
type KymaConfig struct {
	Version        string      `json:"version"`
	Profile        string      `json:"profile"`
	Components     []Component `json:"components"`
	Administrators []string    `json:"administrators"`
}

// RuntimeInput names the runtime.
type RuntimeInput struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// Metadata tells where the runtime comes from.
type Metadata struct {
	GlobalAccountID string `json:"globalAccountID"`
	SubAccountID    string `json:"subAccountID"`
	ServiceID       string `json:"serviceID"`
	ServicePlanID   string `json:"servicePlanID"`
	ServicePlanName string `json:"servicePlanName"`
	ShootName       string `json:"shootName"`
	InstanceID      string `json:"instanceID"`
	Region          string `json:"region"`
}

// Cluster is the body of POST and PUT /v1/clusters.
type Cluster struct {
	RuntimeID    string       `json:"runtimeID"`
	RuntimeInput RuntimeInput `json:"runtimeInput"`
	KymaConfig   KymaConfig   `json:"kymaConfig"`
	Metadata     Metadata     `json:"metadata"`
	Kubeconfig   string       `json:"kubeconfig"`
}

// State is the answer of every cluster endpoint.
type State struct {
	Cluster              string `json:"cluster"`
	ClusterVersion       int64  `json:"clusterVersion"`
	ConfigurationVersion int64  `json:"configurationVersion"`
	Status               string `json:"status"`
	StatusURL            string `json:"statusURL"`
}

// Options configures the stand-in.
type Options struct {
	// ReconcileTime is how long each of reconcile_pending and reconciling lasts before the next status;
	// zero makes an applied configuration ready (or error) at once.
	ReconcileTime time.Duration
	// DeleteTime is the same for delete_pending and deleting before deleted.
	DeleteTime time.Duration
	// FailingComponents are component names whose presence in a configuration makes its reconciliation
	// end in error; applying a configuration without them reconciles again.
	FailingComponents []string
	// RetryableComponents are component names whose presence makes the reconciliation of a
	// configuration, and the deletion of its cluster, fail once retryably (for ReconcileTime or
	// DeleteTime the status is reconcile_error_retryable or delete_error_retryable) before the
	// Reconciler's own retry succeeds, as the real one retries such failures.
	RetryableComponents []string
	// Now returns the current time; time.Now when nil.
	Now func() time.Time
	// Store keeps the clusters and counts; Open loads them from it. New uses a new MemoryStore.
	Store durable.Store
}

// The kinds of rows in the store.
const (
	kindCluster = "cluster"
	kindTotals  = "calls"
)

// Server is the Reconciler stand-in; it implements sandbox.System.
type Server struct {
	opts      Options
	failing   map[string]bool
	retryable map[string]bool
	mux       *http.ServeMux

	durable *durable.Durable
	handler http.Handler

	mu       sync.Mutex
	clusters *durable.Table[cluster] // by runtime ID; configurations keep their numbers exact, as applied
	totals   *durable.Counts
}

// New returns a stand-in without clusters that keeps its state in memory.
func New(opts Options) *Server {
	opts.Store = nil // a new MemoryStore
	return durable.InMemory(Open(context.Background(), opts))
}

// Open returns a stand-in with the clusters and counts kept in opts.Store.
func Open(ctx context.Context, opts Options) (*Server, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{opts: opts, failing: map[string]bool{}, retryable: map[string]bool{}}
	for _, c := range opts.FailingComponents {
		s.failing[c] = true
	}
	for _, c := range opts.RetryableComponents {
		s.retryable[c] = true
	}
	s.durable = durable.NewDurable(durable.Persist{Store: opts.Store, System: Name, Lock: &s.mu})
	s.clusters = durable.NewTable[cluster](s.durable, kindCluster, true)
	s.totals = s.durable.Tally(kindTotals)
	if err := s.durable.Load(ctx); err != nil {
		return nil, err
	}
	m := http.NewServeMux()
	m.HandleFunc("POST /v1/clusters", s.handleApply(false))
	m.HandleFunc("PUT /v1/clusters", s.handleApply(true))
	m.HandleFunc("GET /v1/clusters/{runtimeID}/status", s.handleStatus)
	m.HandleFunc("DELETE /v1/clusters/{runtimeID}", s.handleDelete)
	s.mux = m
	s.handler = s.durable.Handler(m)
	return s, nil
}

// Name implements sandbox.System.
func (s *Server) Name() string { return Name }

// ServeHTTP implements sandbox.System; paths are relative to /reconciler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Objects implements sandbox.System.
func (s *Server) Objects() any { return s.Snapshot() }

// Reset implements sandbox.System: it forgets every cluster and count, durably.
func (s *Server) Reset(ctx context.Context) error { return s.durable.Reset(ctx) }

// cluster returns the cluster of the runtime id; change it only to put it back.
func (s *Server) cluster(id string) (*cluster, bool) {
	c, ok := s.clusters.Get(id)
	if ok && c.Calls == nil {
		c.Calls = map[string]int{}
	}
	return c, ok
}
