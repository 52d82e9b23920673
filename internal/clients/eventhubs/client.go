// Package eventhubs is the broker's client of Azure Resource Manager (ARM) for Azure Event Hubs: it
// creates a resource group holding one Standard, Kafka-enabled Event Hubs namespace for a runtime,
// reads the namespace's connection string, and deletes the group again. It calls the ARM REST API
// directly (no SDK) with Microsoft Entra ID client-credentials tokens. Calls are retried with backoff
// on transient failures only (network errors, 429, 5xx) a few times within a call's budget (clientkit.Calls). Creation is
// idempotent because ARM addresses everything by name (PUT creates or updates), and deleting a
// missing group succeeds. When ARM creates the namespace as a long-running operation (202
// Accepted), the client follows it, one request a call, through the URLs the caller keeps
// (lro.go).
package eventhubs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"golang.org/x/oauth2"
)

// API versions the client speaks.
const (
	ResourceGroupsAPIVersion = "2021-04-01"
	EventHubAPIVersion       = "2021-11-01"
)

// RootRule is the namespace's authorization rule whose connection string ConnectionString returns.
const RootRule = "RootManageSharedAccessKey"

// Provisioning states of resource groups and namespaces.
const (
	StateSucceeded  = "Succeeded"
	StateActivating = "Activating"
	StateDeleting   = "Deleting"
	StateFailed     = "Failed"
)

// Namespaces is all the broker needs of Azure.
type Namespaces interface {
	// EnsureNamespace creates (PUT, idempotent) the resource group and, in it, a Standard, Kafka-enabled namespace, and returns it.
	EnsureNamespace(ctx context.Context, req NamespaceRequest) (*Namespace, error)
	// ConnectionString returns the primary connection string of the namespace's RootManageSharedAccessKey rule.
	ConnectionString(ctx context.Context, resourceGroup, namespace string) (string, error)
	// DeleteResourceGroup starts deleting the group (missing ok) and reports whether it is gone.
	DeleteResourceGroup(ctx context.Context, resourceGroup string) (gone bool, err error)
}

// NamespaceRequest describes the namespace to ensure. Namespace names are globally unique in Azure.
type NamespaceRequest struct {
	ResourceGroup, Name, Region string
	// Tags are put on both the resource group and the namespace.
	Tags map[string]string
	// Operation is the creation ARM runs asynchronously, as a previous call returned it
	// (Namespace.Operation): the call follows it rather than PUT the namespace again.
	Operation *Operation
}

// Namespace is an Event Hubs namespace; ProvisioningState is "Succeeded" when it is usable.
type Namespace struct {
	ID, Name, ResourceGroup, Region, ProvisioningState string
	// Operation is set while ARM creates the namespace asynchronously (ProvisioningState is then
	// the operation's status, e.g. Accepted or InProgress): keep it durably, and call again with
	// it after RetryAfter.
	Operation  *Operation
	RetryAfter time.Duration
}

var _ Namespaces = (*Client)(nil)

// Client calls ARM. It is safe for concurrent use.
type Client struct {
	cfg    Config
	caller *clientkit.Caller
	base   string // <ARM>/subscriptions/<id>
	http   *http.Client
	tokens *tokens
}

// New returns a client for cfg; an empty ARMURL, zero Timeout and backoff settings take their defaults.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("Azure configuration: %w", err)
	}
	cfg.withDefaults()
	httpc := clientkit.NewHTTPClient(cfg.Timeout, cfg.Metrics.Transport("azure", cfg.Transport))
	return &Client{
		cfg:    cfg,
		caller: newCaller(cfg),
		base:   cfg.ARMURL + "/subscriptions/" + url.PathEscape(cfg.SubscriptionID),
		http:   httpc,
		tokens: newTokens(httpc, cfg.TokenURL, cfg.ClientID, cfg.ClientSecret, cfg.ARMURL+"/.default"),
	}, nil
}

// Config returns the configuration in use, defaults applied.
func (c *Client) Config() Config { return c.cfg }

type groupResource struct {
	ID         string            `json:"id,omitempty"`
	Name       string            `json:"name,omitempty"`
	Location   string            `json:"location"`
	Tags       map[string]string `json:"tags,omitempty"`
	Properties *struct {
		ProvisioningState string `json:"provisioningState"`
	} `json:"properties,omitempty"`
}

func (g *groupResource) state() string {
	if g.Properties == nil {
		return ""
	}
	return g.Properties.ProvisioningState
}

type sku struct {
	Name     string `json:"name"`
	Tier     string `json:"tier"`
	Capacity int    `json:"capacity"`
}

type namespaceProperties struct {
	ProvisioningState  string `json:"provisioningState,omitempty"`
	KafkaEnabled       bool   `json:"kafkaEnabled"`
	ServiceBusEndpoint string `json:"serviceBusEndpoint,omitempty"`
}

type namespaceResource struct {
	ID         string              `json:"id,omitempty"`
	Name       string              `json:"name,omitempty"`
	Location   string              `json:"location"`
	Sku        sku                 `json:"sku"`
	Properties namespaceProperties `json:"properties"`
	Tags       map[string]string   `json:"tags,omitempty"`
}

type accessKeys struct {
	PrimaryConnectionString   string `json:"primaryConnectionString"`
	SecondaryConnectionString string `json:"secondaryConnectionString"`
	PrimaryKey                string `json:"primaryKey"`
	SecondaryKey              string `json:"secondaryKey"`
	KeyName                   string `json:"keyName"`
}

// EnsureNamespace returns the namespace if it exists, and otherwise creates the resource group (PUT,
// which leaves an existing group as it is but for its tags) and the namespace in it. ARM addresses
// both by name, so a retry after a lost response cannot create a duplicate; each attempt still looks
// the namespace up first so that an existing namespace is not updated while it activates. A new
// namespace is usually "Activating": call again until its ProvisioningState is "Succeeded". While the
// group is being deleted, or ARM still runs another operation on the namespace (409), the failure
// is temporary.
//
// ARM may run the creation asynchronously (202 Accepted, no body): the namespace returned then
// carries the Operation to follow and the wait ARM asks for (Retry-After). Called with that
// Operation, EnsureNamespace makes one request about it (Azure-AsyncOperation, else Location)
// instead of the PUT: still running, it returns the namespace pending again; succeeded, the
// namespace; failed or canceled, a permanent error with Azure's code and message; unknown to ARM
// (404), it starts over with the PUT.
func (c *Client) EnsureNamespace(ctx context.Context, req NamespaceRequest) (*Namespace, error) {
	op := fmt.Sprintf("ensuring Azure Event Hubs namespace %q in resource group %q", req.Name, req.ResourceGroup)
	if err := req.validate(); err != nil {
		return nil, &Error{Op: op, Err: err}
	}
	var out *Namespace
	following := req.Operation
	err := c.retry(ctx, op, func(ctx context.Context) error {
		if !following.empty() {
			ns, err := c.poll(ctx, req, following)
			if !errors.Is(err, errOperationGone) {
				out = ns
				return err
			}
			following = nil
		}
		ns, err := c.getNamespace(ctx, req.ResourceGroup, req.Name)
		switch {
		case err == nil && usable(ns.Properties.ProvisioningState):
			out = ns.toNamespace(req.ResourceGroup)
			return nil
		case err != nil && !missing(err, codeResourceGroupNotFound, codeResourceNotFound):
			return fmt.Errorf("looking up the namespace: %w", err)
		}
		group := groupResource{Location: req.Region, Tags: req.Tags}
		if err := c.call(ctx, http.MethodPut, groupPath(req.ResourceGroup), ResourceGroupsAPIVersion, group, nil); err != nil {
			if Code(err) == codeResourceGroupBeingDeleted {
				return beingDeleted(req.ResourceGroup, err)
			}
			return fmt.Errorf("creating the resource group: %w", err)
		}
		body := namespaceResource{
			Location:   req.Region,
			Sku:        sku{Name: "Standard", Tier: "Standard", Capacity: 1},
			Properties: namespaceProperties{KafkaEnabled: true},
			Tags:       req.Tags,
		}
		a, err := c.send(ctx, http.MethodPut, c.url(namespacePath(req.ResourceGroup, req.Name), EventHubAPIVersion), body)
		switch {
		case Code(err) == codeResourceGroupBeingDeleted:
			return beingDeleted(req.ResourceGroup, err)
		case missing(err, codeResourceGroupNotFound):
			// ARM replicates a new group asynchronously; it may not be visible everywhere yet.
			return fmt.Errorf("creating the namespace: the new resource group is not visible yet (%v)", err)
		case clientkit.StatusOf(err) == http.StatusConflict:
			// Another operation on the namespace, e.g. its creation whose URLs were lost, still runs.
			return fmt.Errorf("creating the namespace: Azure still runs another operation on it (%v)", err)
		case err != nil:
			return fmt.Errorf("creating the namespace: %w", err)
		case a.status == http.StatusAccepted:
			lro, wait, err := c.accepted(a.header)
			if err != nil {
				return fmt.Errorf("creating the namespace: %w", err)
			}
			out = pending(req, StateAccepted, lro, wait)
			return nil
		}
		var created namespaceResource
		if err := json.Unmarshal(a.body, &created); err != nil {
			return clientkit.Permanent(fmt.Errorf("creating the namespace: decoding the %d answer: %w", a.status, err))
		}
		out = created.toNamespace(req.ResourceGroup)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// usable tells whether an existing namespace is to be returned rather than PUT again: a failed one is
// provisioned again by a PUT, one being deleted goes with its group.
func usable(state string) bool {
	return state != StateFailed && state != StateDeleting && state != StateCanceled
}

// beingDeleted is a temporary failure: once the deletion completes the group can be created again.
// It does not wrap err so that the 409 is not classified as permanent.
func beingDeleted(group string, err error) error {
	return fmt.Errorf("resource group %q is being deleted; retry when it is gone (%v)", group, err)
}

func (r NamespaceRequest) validate() error {
	var errs []error
	for _, f := range []struct{ name, val string }{{"resource group", r.ResourceGroup}, {"namespace name", r.Name}, {"region", r.Region}} {
		if strings.TrimSpace(f.val) == "" {
			errs = append(errs, fmt.Errorf("the %s is empty", f.name))
		}
	}
	return errors.Join(errs...)
}

func (c *Client) getNamespace(ctx context.Context, group, name string) (*namespaceResource, error) {
	var ns namespaceResource
	if err := c.call(ctx, http.MethodGet, namespacePath(group, name), EventHubAPIVersion, nil, &ns); err != nil {
		return nil, err
	}
	return &ns, nil
}

func (ns *namespaceResource) toNamespace(group string) *Namespace {
	return &Namespace{ID: ns.ID, Name: ns.Name, ResourceGroup: group, Region: ns.Location,
		ProvisioningState: ns.Properties.ProvisioningState}
}

// ConnectionString returns the primary connection string of the namespace's RootManageSharedAccessKey
// rule. A missing group or namespace is a permanent error for which IsNotFound is true.
func (c *Client) ConnectionString(ctx context.Context, resourceGroup, namespace string) (string, error) {
	op := fmt.Sprintf("reading the connection string of Azure Event Hubs namespace %q in resource group %q", namespace, resourceGroup)
	var keys accessKeys
	err := c.retry(ctx, op, func(ctx context.Context) error {
		path := namespacePath(resourceGroup, namespace) + "/authorizationRules/" + RootRule + "/listKeys"
		if err := c.call(ctx, http.MethodPost, path, EventHubAPIVersion, nil, &keys); err != nil {
			return err
		}
		if keys.PrimaryConnectionString == "" {
			return clientkit.Permanent(errors.New("the answer has no primaryConnectionString"))
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return keys.PrimaryConnectionString, nil
}

// DeleteResourceGroup starts deleting the group, with everything in it, unless it is missing or being
// deleted already, and reports whether it is gone. Call it again until it is.
func (c *Client) DeleteResourceGroup(ctx context.Context, resourceGroup string) (gone bool, err error) {
	op := fmt.Sprintf("deleting Azure resource group %q", resourceGroup)
	if strings.TrimSpace(resourceGroup) == "" {
		return false, &Error{Op: op, Err: errors.New("the resource group is empty")}
	}
	err = c.retry(ctx, op, func(ctx context.Context) error {
		var g groupResource
		err := c.call(ctx, http.MethodGet, groupPath(resourceGroup), ResourceGroupsAPIVersion, nil, &g)
		switch {
		case missing(err, codeResourceGroupNotFound):
			gone = true
			return nil
		case err != nil:
			return fmt.Errorf("looking up the resource group: %w", err)
		case g.state() == StateDeleting:
			gone = false
			return nil
		}
		err = c.call(ctx, http.MethodDelete, groupPath(resourceGroup), ResourceGroupsAPIVersion, nil, nil)
		if err != nil && !missing(err, codeResourceGroupNotFound) {
			return err
		}
		// A short deletion may be over already; look again rather than make the caller wait for nothing.
		err = c.call(ctx, http.MethodGet, groupPath(resourceGroup), ResourceGroupsAPIVersion, nil, &g)
		switch {
		case missing(err, codeResourceGroupNotFound):
			gone = true
		case err != nil:
			return fmt.Errorf("looking up the resource group: %w", err)
		default:
			gone = false
		}
		return nil
	})
	return gone && err == nil, err
}

// url is the absolute URL of an ARM path of the subscription.
func (c *Client) url(path, apiVersion string) string {
	return c.base + path + "?" + url.Values{"api-version": {apiVersion}}.Encode()
}

func groupPath(group string) string { return "/resourcegroups/" + url.PathEscape(group) }

func namespacePath(group, name string) string {
	return "/resourceGroups/" + url.PathEscape(group) + "/providers/Microsoft.EventHub/namespaces/" + url.PathEscape(name)
}

// retry runs attempt until it succeeds, fails permanently, or has made its attempts within the
// call\'s budget, sleeping with jittered exponential backoff between attempts; while the system is
// down it fails at once.
func (c *Client) retry(ctx context.Context, op string, attempt func(context.Context) error) error {
	return c.caller.Retry(ctx, op, attempt)
}

// call makes one authenticated ARM request; in and out are JSON bodies, either may be nil.
func (c *Client) call(ctx context.Context, method, path, apiVersion string, in, out any) error {
	return c.tokens.authorized(ctx, func(tok *oauth2.Token) error {
		_, err := clientkit.DoJSON(ctx, c.http, tok.SetAuthHeader, method, c.base, path, url.Values{"api-version": {apiVersion}}, in, out)
		return err
	})
}

func newCaller(cfg Config) *clientkit.Caller {
	return clientkit.NewCaller("azure", cfg.RetryInitialBackoff, cfg.RetryMaxBackoff, cfg.Calls, cfg.Metrics)
}
