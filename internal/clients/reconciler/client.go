// Package reconciler is the client of the Kyma Reconciler mothership API (v1), to which the broker hands
// a Kyma 2.x runtime's configuration so that the Reconciler installs Kyma on the cluster. Calls are
// retried with backoff on transient failures only (network errors, 429, 5xx) a few times within a call's
// budget (clientkit.Calls), and are idempotent: the Reconciler creates no new configuration version for a configuration equal
// to the current one, so a retried apply changes nothing, and deleting a missing cluster succeeds.
package reconciler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
)

// Cluster statuses the Reconciler reports.
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
	// StatusReconcileErrorRetryable and StatusDeleteErrorRetryable: the reconciliation or
	// deletion failed, and the Reconciler retries it by itself; the caller waits and rechecks.
	StatusReconcileErrorRetryable = "reconcile_error_retryable"
	StatusDeleteErrorRetryable    = "delete_error_retryable"
)

// Statuses are all the statuses of the API's status enum.
func Statuses() []string {
	return []string{StatusReconcilePending, StatusReconcileDisabled, StatusReady, StatusError, StatusReconciling,
		StatusDeletePending, StatusDeleteError, StatusDeleting, StatusDeleted, StatusReconcileErrorRetryable, StatusDeleteErrorRetryable}
}

const clustersPath = "/v1/clusters"

// Configuration is one configuration entry of a component; Value is a string, boolean or number
// (the API accepts no objects or arrays).
type Configuration struct {
	Key    string `json:"key"`
	Value  any    `json:"value"`
	Secret bool   `json:"secret"`
}

// Component is a Kyma component to install. The API requires every field, URL and version
// included: an empty URL means the component comes from the Kyma release of KymaConfig.Version.
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

// Metadata tells the Reconciler where the runtime comes from.
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

// Cluster is the configuration of one runtime's cluster as the broker hands it over.
type Cluster struct {
	RuntimeID    string       `json:"runtimeID"`
	RuntimeInput RuntimeInput `json:"runtimeInput"`
	KymaConfig   KymaConfig   `json:"kymaConfig"`
	Metadata     Metadata     `json:"metadata"`
	Kubeconfig   string       `json:"kubeconfig"`
}

// State is the Reconciler's view of a cluster.
type State struct {
	Cluster              string `json:"cluster"`
	ClusterVersion       int64  `json:"clusterVersion"`
	ConfigurationVersion int64  `json:"configurationVersion"`
	Status               string `json:"status"`
	StatusURL            string `json:"statusURL"`
}

// Client calls the Reconciler mothership API. It is safe for concurrent use.
type Client struct {
	cfg    Config
	caller *clientkit.Caller
	base   string
	http   *http.Client
}

// New returns a client for cfg; zero Timeout and backoff settings take their defaults.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("Reconciler configuration: %w", err)
	}
	cfg.withDefaults()
	return &Client{
		cfg:    cfg,
		caller: newCaller(cfg),
		base:   strings.TrimRight(cfg.URL, "/") + clustersPath,
		http:   clientkit.NewHTTPClient(cfg.Timeout, cfg.Metrics.Transport("reconciler", cfg.Transport)),
	}, nil
}

// ApplyClusterConfig creates the cluster or replaces its configuration and returns the resulting
// state. Applying the current configuration again creates no new configuration version, which is what
// makes retrying after a lost response safe.
func (c *Client) ApplyClusterConfig(ctx context.Context, cluster Cluster) (*State, error) {
	op := fmt.Sprintf("applying the cluster configuration of runtime %q", cluster.RuntimeID)
	if strings.TrimSpace(cluster.RuntimeID) == "" {
		return nil, &Error{Op: op, Err: errors.New("the runtime ID is empty")}
	}
	cluster = withEmptyLists(cluster)
	var out State
	err := c.retry(ctx, op, func(ctx context.Context) error {
		return c.call(ctx, http.MethodPost, "", cluster, &out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// withEmptyLists returns cluster with its nil lists empty: the API requires components,
// administrators and each component's configuration as arrays, and a nil slice encodes as null.
func withEmptyLists(cluster Cluster) Cluster {
	k := &cluster.KymaConfig
	if k.Administrators == nil {
		k.Administrators = []string{}
	}
	comps := make([]Component, len(k.Components))
	for i, comp := range k.Components {
		if comp.Configuration == nil {
			comp.Configuration = []Configuration{}
		}
		comps[i] = comp
	}
	k.Components = comps
	return cluster
}

// GetStatus returns the cluster's state; an unknown cluster is a permanent error for which IsNotFound
// is true. A deleted cluster the Reconciler still knows has the status StatusDeleted.
func (c *Client) GetStatus(ctx context.Context, runtimeID string) (*State, error) {
	op := fmt.Sprintf("getting the reconciliation status of runtime %q", runtimeID)
	if strings.TrimSpace(runtimeID) == "" {
		return nil, &Error{Op: op, Err: errors.New("the runtime ID is empty")}
	}
	var out State
	err := c.retry(ctx, op, func(ctx context.Context) error {
		return c.call(ctx, http.MethodGet, "/"+url.PathEscape(runtimeID)+"/status", nil, &out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteCluster asks the Reconciler to remove Kyma from the cluster; deleting an unknown cluster
// succeeds. The deletion runs asynchronously: poll GetStatus until StatusDeleted.
func (c *Client) DeleteCluster(ctx context.Context, runtimeID string) error {
	op := fmt.Sprintf("deleting the cluster of runtime %q", runtimeID)
	if strings.TrimSpace(runtimeID) == "" {
		return &Error{Op: op, Err: errors.New("the runtime ID is empty")}
	}
	return c.retry(ctx, op, func(ctx context.Context) error {
		return clientkit.IgnoreNotFound(c.call(ctx, http.MethodDelete, "/"+url.PathEscape(runtimeID), nil, nil))
	})
}

// retry runs attempt until it succeeds, fails permanently, or has made its attempts within the
// call\'s budget, sleeping with jittered exponential backoff between attempts; while the system is
// down it fails at once.
func (c *Client) retry(ctx context.Context, op string, attempt func(context.Context) error) error {
	return c.caller.Retry(ctx, op, attempt)
}

// call makes one request; in and out are JSON bodies, either may be nil. The mothership API is not
// authenticated.
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	_, err := clientkit.DoJSON(ctx, c.http, noAuth, method, c.base, path, nil, in, out)
	return err
}

func noAuth(*http.Request) {}

func newCaller(cfg Config) *clientkit.Caller {
	return clientkit.NewCaller("reconciler", cfg.RetryInitialBackoff, cfg.RetryMaxBackoff, cfg.Calls, cfg.Metrics)
}
