// Package edp is the client of SAP's Event Data Platform (EDP) data tenant API as the original broker
// called it (testdata/contract.json): it registers a runtime as the data tenant
// <subaccount ID>/<environment> of the configured namespace, with its secret and the runtime's
// parameters as metadata, and deregisters it. Calls authenticate with OAuth2 client credentials
// (scopes Scopes), are retried with backoff on transient failures only (network errors, 429, 5xx) a
// few times within a call's budget (clientkit.Calls), and are idempotent: registering a registered
// runtime finishes its metadata (EDP answers an existing tenant or key 409), deregistering a missing
// one succeeds.
package edp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"golang.org/x/oauth2"
)

// Metadata keys of a runtime's data tenant.
const (
	MaasConsumerEnvironmentKey = "maasConsumerEnvironment"
	MaasConsumerRegionKey      = "maasConsumerRegion"
	MaasConsumerSubAccountKey  = "maasConsumerSubAccount"
	MaasConsumerServicePlanKey = "maasConsumerServicePlan"
)

// Values of maasConsumerEnvironment.
const (
	EnvironmentCF         = "CF"
	EnvironmentKubernetes = "KUBERNETES"
	EnvironmentNeo        = "NEO"
)

// Values of maasConsumerServicePlan.
const (
	ServicePlanFree     = "free"
	ServicePlanTDD      = "tdd"
	ServicePlanStandard = "standard"
)

// ConsumerEnvironment is the maasConsumerEnvironment of a platform region: by the region's prefix
// (cf-eu10 is CF, k8s-... KUBERNETES, neo-... NEO), CF for any other.
func ConsumerEnvironment(platformRegion string) string {
	prefix, _, _ := strings.Cut(platformRegion, "-")
	switch prefix {
	case "k8s":
		return EnvironmentKubernetes
	case "neo":
		return EnvironmentNeo
	default:
		return EnvironmentCF
	}
}

// ConsumerServicePlan is the maasConsumerServicePlan of a plan name: free for the free plan, tdd for
// azure_lite, standard for any other.
func ConsumerServicePlan(planName string) string {
	switch planName {
	case "free":
		return ServicePlanFree
	case "azure_lite":
		return ServicePlanTDD
	default:
		return ServicePlanStandard
	}
}

// Scopes are the scopes of the client's tokens.
var Scopes = []string{"edp-namespace.read", "edp-namespace.update"}

// TenantSecret is the secret of the data tenant name/environment: the standard base64 of the two.
func TenantSecret(name, environment string) string {
	return base64.StdEncoding.EncodeToString([]byte(name + environment))
}

// Namespace is a data tenant's namespace.
type Namespace struct {
	Name string `json:"name"`
}

// DataTenant is a data tenant as EDP returns it.
type DataTenant struct {
	Namespace   Namespace `json:"namespace"`
	Name        string    `json:"name"`
	Environment string    `json:"environment"`
}

type dataTenantRequest struct {
	Name        string `json:"name"`
	Environment string `json:"environment"`
	Secret      string `json:"secret"`
}

// MetadataItem is one metadata entry of a data tenant as EDP returns it.
type MetadataItem struct {
	DataTenant DataTenant `json:"dataTenant"`
	Key        string     `json:"key"`
	Value      string     `json:"value"`
}

type metadataRequest struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Client calls the EDP data tenant API. It is safe for concurrent use.
type Client struct {
	cfg    Config
	caller *clientkit.Caller
	base   string // <URL>/namespaces/<namespace>/dataTenants
	http   *http.Client
	tokens *clientkit.Tokens
}

// New returns a client for cfg; zero Environment, Timeout and backoff settings take their defaults.
// A disabled configuration is refused: the caller is meant to skip EDP instead.
func New(cfg Config) (*Client, error) {
	if cfg.Disabled {
		return nil, errors.New("EDP configuration: EDP is disabled (APP_EDP_DISABLED)")
	}
	cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("EDP configuration: %w", err)
	}
	httpc := clientkit.NewHTTPClient(cfg.Timeout, cfg.Metrics.Transport("edp", cfg.Transport))
	return &Client{
		cfg:    cfg,
		caller: newCaller(cfg),
		base:   strings.TrimRight(cfg.URL, "/") + "/namespaces/" + url.PathEscape(cfg.Namespace) + "/dataTenants",
		http:   httpc,
		tokens: clientkit.NewTokens(httpc, cfg.OAuthURL, cfg.ClientID, cfg.ClientSecret, Scopes...),
	}, nil
}

// Config returns the configuration in use, defaults applied.
func (c *Client) Config() Config { return c.cfg }

func (c *Client) tenantPath(subaccountID string) string {
	return "/" + url.PathEscape(subaccountID) + "/" + url.PathEscape(c.cfg.Environment)
}

func (c *Client) tenantName(subaccountID string) string {
	return fmt.Sprintf("%q", subaccountID+"/"+c.cfg.Environment)
}

func checkSubaccount(op, subaccountID string) error {
	switch {
	case strings.TrimSpace(subaccountID) == "":
		return &Error{Op: op, Err: errors.New("the subaccount ID is empty")}
	case strings.Contains(subaccountID, "/"):
		return &Error{Op: op, Err: errors.New("the subaccount ID contains '/'")}
	}
	return nil
}

// RegisterRuntime registers the runtime of a subaccount: it creates the data tenant
// <subaccountID>/<Environment> with its secret (TenantSecret) unless it exists (EDP answering 409),
// then creates every metadata entry; a key EDP already has (409) keeps its value when it is the same
// and is deleted and created again otherwise, so other keys stay alone. Each step is retried on its
// own, so calling it again after a failure, or for a registered runtime, finishes the registration
// without duplicates.
func (c *Client) RegisterRuntime(ctx context.Context, subaccountID string, metadata map[string]string) error {
	// One budget for all the calls this takes.
	ctx, cancel := c.caller.Bound(ctx)
	defer cancel()
	if err := checkSubaccount(fmt.Sprintf("registering subaccount %q in EDP", subaccountID), subaccountID); err != nil {
		return err
	}
	keys := make([]string, 0, len(metadata))
	for k := range metadata {
		if strings.TrimSpace(k) == "" || strings.Contains(k, "/") {
			return &Error{Op: fmt.Sprintf("registering subaccount %q in EDP", subaccountID),
				Err: fmt.Errorf("invalid metadata key %q", k)}
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tenant := c.tenantName(subaccountID)
	err := c.retry(ctx, "creating EDP data tenant "+tenant, func(ctx context.Context) error {
		err := c.call(ctx, http.MethodPost, "", dataTenantRequest{Name: subaccountID, Environment: c.cfg.Environment,
			Secret: TenantSecret(subaccountID, c.cfg.Environment)}, nil)
		if clientkit.StatusOf(err) == http.StatusConflict {
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		item := metadataRequest{Key: k, Value: metadata[k]}
		err := c.retry(ctx, fmt.Sprintf("setting metadata %q of EDP data tenant %s", k, tenant), func(ctx context.Context) error {
			return c.setMetadata(ctx, subaccountID, item)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// setMetadata creates the metadata entry; EDP answers 409 for a key it has, which then keeps a same
// value or is replaced.
func (c *Client) setMetadata(ctx context.Context, subaccountID string, item metadataRequest) error {
	err := c.call(ctx, http.MethodPost, c.tenantPath(subaccountID)+"/metadata", item, nil)
	if clientkit.StatusOf(err) != http.StatusConflict {
		return err
	}
	var items []MetadataItem
	if err := c.call(ctx, http.MethodGet, c.tenantPath(subaccountID)+"/metadata", nil, &items); err != nil {
		return fmt.Errorf("reading the existing entry: %w", err)
	}
	for _, it := range items {
		if it.Key == item.Key && it.Value == item.Value {
			return nil
		}
	}
	if err := clientkit.IgnoreNotFound(c.call(ctx, http.MethodDelete, c.tenantPath(subaccountID)+"/metadata/"+url.PathEscape(item.Key), nil, nil)); err != nil {
		return fmt.Errorf("deleting the existing entry: %w", err)
	}
	return c.call(ctx, http.MethodPost, c.tenantPath(subaccountID)+"/metadata", item, nil)
}

// DeregisterRuntime deregisters the runtime of a subaccount: it deletes every metadata entry of the
// data tenant, then the data tenant. A missing data tenant or entry counts as deleted, so calling it
// again, or for a runtime never registered, succeeds.
func (c *Client) DeregisterRuntime(ctx context.Context, subaccountID string) error {
	// One budget for all the calls this takes.
	ctx, cancel := c.caller.Bound(ctx)
	defer cancel()
	if err := checkSubaccount(fmt.Sprintf("deregistering subaccount %q from EDP", subaccountID), subaccountID); err != nil {
		return err
	}
	tenant := c.tenantName(subaccountID)
	items, err := c.listMetadata(ctx, subaccountID)
	if IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, it := range items {
		err := c.retry(ctx, fmt.Sprintf("deleting metadata %q of EDP data tenant %s", it.Key, tenant), func(ctx context.Context) error {
			return clientkit.IgnoreNotFound(c.call(ctx, http.MethodDelete, c.tenantPath(subaccountID)+"/metadata/"+url.PathEscape(it.Key), nil, nil))
		})
		if err != nil {
			return err
		}
	}
	return c.retry(ctx, "deleting EDP data tenant "+tenant, func(ctx context.Context) error {
		return clientkit.IgnoreNotFound(c.call(ctx, http.MethodDelete, c.tenantPath(subaccountID), nil, nil))
	})
}

// GetDataTenant returns the data tenant of a subaccount; a missing one is a permanent error for which
// IsNotFound is true.
func (c *Client) GetDataTenant(ctx context.Context, subaccountID string) (*DataTenant, error) {
	op := "getting EDP data tenant " + c.tenantName(subaccountID)
	if err := checkSubaccount(op, subaccountID); err != nil {
		return nil, err
	}
	var out DataTenant
	err := c.retry(ctx, op, func(ctx context.Context) error {
		return c.call(ctx, http.MethodGet, c.tenantPath(subaccountID), nil, &out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// GetMetadata returns the metadata of a subaccount's data tenant; a missing data tenant is a permanent
// error for which IsNotFound is true.
func (c *Client) GetMetadata(ctx context.Context, subaccountID string) (map[string]string, error) {
	if err := checkSubaccount("listing metadata of EDP data tenant "+c.tenantName(subaccountID), subaccountID); err != nil {
		return nil, err
	}
	items, err := c.listMetadata(ctx, subaccountID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(items))
	for _, it := range items {
		out[it.Key] = it.Value
	}
	return out, nil
}

func (c *Client) listMetadata(ctx context.Context, subaccountID string) ([]MetadataItem, error) {
	var items []MetadataItem
	err := c.retry(ctx, "listing metadata of EDP data tenant "+c.tenantName(subaccountID), func(ctx context.Context) error {
		items = nil
		return c.call(ctx, http.MethodGet, c.tenantPath(subaccountID)+"/metadata", nil, &items)
	})
	return items, err
}

// retry runs attempt until it succeeds, fails permanently, or has made its attempts within the
// call\'s budget, sleeping with jittered exponential backoff between attempts; while the system is
// down it fails at once.
func (c *Client) retry(ctx context.Context, op string, attempt func(context.Context) error) error {
	return c.caller.Retry(ctx, op, attempt)
}

// call makes one authenticated request; in and out are JSON bodies, either may be nil. When EDP
// rejects a token it still considers valid (EDP restarted, token revoked), it fetches a new token
// and tries once more.
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	return c.tokens.Authorized(ctx, func(tok *oauth2.Token) error {
		_, err := clientkit.DoJSON(ctx, c.http, tok.SetAuthHeader, method, c.base, path, nil, in, out)
		return err
	})
}

func newCaller(cfg Config) *clientkit.Caller {
	return clientkit.NewCaller("edp", cfg.RetryInitialBackoff, cfg.RetryMaxBackoff, cfg.Calls, cfg.Metrics)
}
