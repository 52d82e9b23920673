// Package servicemanager is the client of SAP Service Manager (SM) REST API v1 as the broker uses it:
// it provisions and binds a service instance (Enterprise Messaging) resolving the offering and plan by
// catalog name, and unbinds and deprovisions it. Calls authenticate with OAuth2 client credentials,
// either the default ones of the configuration or those an instance's context brings
// (sm_operator_credentials), are retried with backoff on transient failures only (network errors, 429,
// 5xx) a few times within a call's budget (clientkit.Calls), and are idempotent: creation relies on
// Service Manager refusing a second object of a name (409) and then looks the object up by name,
// deletion of a missing object succeeds. Plan IDs resolved from catalog names are kept for
// Config.PlanCacheTTL.
package servicemanager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"golang.org/x/oauth2"
)

// States of an operation (LastOperation.State).
const (
	StateInProgress = "in progress"
	StateSucceeded  = "succeeded"
	StateFailed     = "failed"
)

// Types of an operation (LastOperation.Type).
const (
	OperationCreate = "create"
	OperationUpdate = "update"
	OperationDelete = "delete"
)

const (
	offeringsPath = "/v1/service_offerings"
	plansPath     = "/v1/service_plans"
	instancesPath = "/v1/service_instances"
	bindingsPath  = "/v1/service_bindings"
)

// Credentials are Service Manager client credentials, as ERS passes them in sm_operator_credentials.
type Credentials struct {
	ClientID, ClientSecret string
	// URL is the base of the API (sm_url).
	URL string
	// TokenURL is the base of the UAA (url); tokens come from TokenURL+"/oauth/token".
	TokenURL string
}

// InstanceRequest describes an instance to provision; the offering and plan are catalog names.
type InstanceRequest struct {
	Name, OfferingName, PlanName string
	Parameters                   map[string]any
	Labels                       map[string][]string
}

// LastOperation is the last operation on an instance.
type LastOperation struct{ ID, Type, State, Description string }

// Instance is a service instance as Service Manager reports it.
type Instance struct {
	ID, Name, ServicePlanID string
	Ready                   bool
	LastOperation           *LastOperation
}

// BindingRequest describes a binding to create.
type BindingRequest struct {
	Name, InstanceID string
	Parameters       map[string]any
}

// Binding is a service binding with its credentials.
type Binding struct {
	ID, Name, InstanceID string
	Credentials          map[string]any
}

// Client calls the Service Manager API with the credentials each call is given. It is safe for
// concurrent use.
type Client struct {
	cfg    Config
	caller *clientkit.Caller
	http   *http.Client

	mu     sync.Mutex
	tokens map[tokenKey]*clientkit.Tokens // one token source per distinct credentials
	plans  *planCache                     // plan IDs by credentials and catalog names
}

type tokenKey struct{ tokenURL, clientID, clientSecret string }

// New returns a client for cfg; zero Timeout and backoff settings take their defaults.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("configuring the Service Manager client: %w", err)
	}
	cfg.withDefaults()
	return &Client{cfg: cfg, caller: newCaller(cfg), http: clientkit.NewHTTPClient(cfg.Timeout, cfg.Metrics.Transport("servicemanager", cfg.Transport)), tokens: map[tokenKey]*clientkit.Tokens{},
		plans: newPlanCache(cfg.PlanCacheTTL, time.Now)}, nil
}

// Config returns the configuration in use, defaults applied.
func (c *Client) Config() Config { return c.cfg }

// DefaultCredentials returns the credentials of the configuration; false when none are configured.
func (c *Client) DefaultCredentials() (Credentials, bool) {
	if !c.cfg.configured() {
		return Credentials{}, false
	}
	return Credentials{ClientID: c.cfg.ClientID, ClientSecret: c.cfg.ClientSecret, URL: c.cfg.URL, TokenURL: c.cfg.TokenURL}, true
}

// ProvisionInstance creates the instance (resolving offering and plan by catalog name) or, when one
// of that name exists, returns that one; it does not wait for it to be ready. Service Manager
// refuses a second instance of a name (409), so each attempt creates first and looks the name up
// only when refused: a retry after a lost response or a crash finds the first one, and the usual
// creation costs no look-up.
func (c *Client) ProvisionInstance(ctx context.Context, creds Credentials, req InstanceRequest) (*Instance, error) {
	op := fmt.Sprintf("provisioning Service Manager instance %q", req.Name)
	if err := check(creds, required{"the instance name", req.Name}, required{"the offering name", req.OfferingName},
		required{"the plan name", req.PlanName}); err != nil {
		return nil, &Error{Op: op, Err: err}
	}
	var out *Instance
	err := c.retry(ctx, op, func(ctx context.Context) error {
		planID, err := c.planID(ctx, creds, req.OfferingName, req.PlanName)
		if err != nil {
			return err
		}
		out, err = c.createInstance(ctx, creds, req, planID)
		if err == nil {
			return nil
		}
		if clientkit.StatusOf(err) == http.StatusConflict {
			found, ferr := c.findInstance(ctx, creds, req.Name)
			if ferr != nil {
				return fmt.Errorf("looking up by name: %w", ferr)
			}
			if found == nil {
				return err // the conflict is not the name's (or the instance went meanwhile)
			}
			out = found
			return nil
		}
		// The cached plan may be gone: resolve it again on the next attempt.
		c.plans.forget(creds, req.OfferingName, req.PlanName)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetInstance returns the instance; a missing one is a permanent error for which IsNotFound is true.
func (c *Client) GetInstance(ctx context.Context, creds Credentials, id string) (*Instance, error) {
	op := fmt.Sprintf("getting Service Manager instance %q", id)
	if err := check(creds, required{"the instance id", id}); err != nil {
		return nil, &Error{Op: op, Err: err}
	}
	var out *Instance
	err := c.retry(ctx, op, func(ctx context.Context) error {
		var err error
		out, err = c.getInstance(ctx, creds, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Bind finds the instance's binding by name or creates it, and returns it with its credentials. The
// instance must be ready: Service Manager refuses with 422 (a permanent error) otherwise.
func (c *Client) Bind(ctx context.Context, creds Credentials, req BindingRequest) (*Binding, error) {
	op := fmt.Sprintf("binding Service Manager instance %q as %q", req.InstanceID, req.Name)
	if err := check(creds, required{"the binding name", req.Name}, required{"the instance id", req.InstanceID}); err != nil {
		return nil, &Error{Op: op, Err: err}
	}
	var out *Binding
	// Service Manager refuses a second binding of a name for an instance (409): create first, and
	// look the name up only when refused (a retry after a lost response or a crash).
	err := c.retry(ctx, op, func(ctx context.Context) error {
		var created bindingJSON
		body := bindingRequestJSON{Name: req.Name, ServiceInstanceID: req.InstanceID, Parameters: req.Parameters}
		_, err := c.call(ctx, creds, http.MethodPost, bindingsPath, url.Values{"async": {"false"}}, body, &created)
		if clientkit.StatusOf(err) == http.StatusConflict {
			found, ferr := c.findBinding(ctx, creds, req.Name, req.InstanceID)
			if ferr != nil {
				return fmt.Errorf("looking up by name: %w", ferr)
			}
			if found != nil {
				out = found
				return nil
			}
		}
		if err != nil {
			return err
		}
		if created.ID == "" {
			return clientkit.Permanent(errors.New("the answer holds no binding id"))
		}
		out = created.binding()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Unbind deletes the binding; deleting a missing one succeeds.
func (c *Client) Unbind(ctx context.Context, creds Credentials, bindingID string) error {
	op := fmt.Sprintf("unbinding Service Manager binding %q", bindingID)
	if err := check(creds, required{"the binding id", bindingID}); err != nil {
		return &Error{Op: op, Err: err}
	}
	return c.retry(ctx, op, func(ctx context.Context) error {
		return c.deleteBinding(ctx, creds, bindingID)
	})
}

// DeprovisionInstance deletes the instance's bindings, since Service Manager refuses to delete an
// instance that has some, and then the instance. It returns once Service Manager has accepted the
// deletion, without waiting for it to finish; an instance that is missing or already being deleted
// counts as done. While the instance's creation is still in progress it waits, as for a transient
// failure: when ctx ends first, the error is temporary.
func (c *Client) DeprovisionInstance(ctx context.Context, creds Credentials, instanceID string) error {
	op := fmt.Sprintf("deprovisioning Service Manager instance %q", instanceID)
	if err := check(creds, required{"the instance id", instanceID}); err != nil {
		return &Error{Op: op, Err: err}
	}
	return c.retry(ctx, op, func(ctx context.Context) error {
		inst, err := c.getInstance(ctx, creds, instanceID)
		if clientkit.StatusOf(err) == http.StatusNotFound {
			return nil
		}
		if err != nil {
			return err
		}
		if lo := inst.LastOperation; lo != nil && lo.State == StateInProgress {
			if lo.Type == OperationDelete {
				return nil // accepted by an earlier attempt whose answer got lost
			}
			// Service Manager refuses (422) to delete an instance while another operation runs on it:
			// wait for that one to end, as for a transient failure.
			return clientkit.Busy(fmt.Errorf("the instance's %s operation is still in progress", lo.Type))
		}
		var bindings listJSON[bindingJSON]
		if _, err := c.call(ctx, creds, http.MethodGet, bindingsPath, fieldQuery(eq("service_instance_id", instanceID)), nil, &bindings); err != nil {
			return fmt.Errorf("listing the instance's bindings: %w", err)
		}
		for _, b := range bindings.Items {
			if err := c.deleteBinding(ctx, creds, b.ID); err != nil {
				return fmt.Errorf("unbinding %q: %w", b.ID, err)
			}
		}
		_, err = c.call(ctx, creds, http.MethodDelete, instancesPath+"/"+url.PathEscape(instanceID), url.Values{"async": {"true"}}, nil, nil)
		return clientkit.IgnoreNotFound(err)
	})
}

func (c *Client) deleteBinding(ctx context.Context, creds Credentials, id string) error {
	_, err := c.call(ctx, creds, http.MethodDelete, bindingsPath+"/"+url.PathEscape(id), url.Values{"async": {"false"}}, nil, nil)
	return clientkit.IgnoreNotFound(err)
}

func (c *Client) getInstance(ctx context.Context, creds Credentials, id string) (*Instance, error) {
	var in instanceJSON
	if _, err := c.call(ctx, creds, http.MethodGet, instancesPath+"/"+url.PathEscape(id), nil, nil, &in); err != nil {
		return nil, err
	}
	return in.instance(), nil
}

// findInstance returns the instance of that name, nil when there is none.
func (c *Client) findInstance(ctx context.Context, creds Credentials, name string) (*Instance, error) {
	var list listJSON[instanceJSON]
	if _, err := c.call(ctx, creds, http.MethodGet, instancesPath, fieldQuery(eq("name", name)), nil, &list); err != nil {
		return nil, err
	}
	for _, in := range list.Items {
		if in.Name == name {
			return in.instance(), nil
		}
	}
	return nil, nil
}

// findBinding returns the instance's binding of that name, nil when there is none.
func (c *Client) findBinding(ctx context.Context, creds Credentials, name, instanceID string) (*Binding, error) {
	var list listJSON[bindingJSON]
	q := fieldQuery(eq("name", name), eq("service_instance_id", instanceID))
	if _, err := c.call(ctx, creds, http.MethodGet, bindingsPath, q, nil, &list); err != nil {
		return nil, err
	}
	for _, b := range list.Items {
		if b.Name == name && b.ServiceInstanceID == instanceID {
			return b.binding(), nil
		}
	}
	return nil, nil
}

// planID resolves a plan by the catalog names of its offering and itself, from the cache while
// the last resolution is fresh. Several offerings may share a catalog name (one per broker): the
// first with such a plan wins.
func (c *Client) planID(ctx context.Context, creds Credentials, offering, plan string) (string, error) {
	if id, ok := c.plans.get(creds, offering, plan); ok {
		return id, nil
	}
	id, err := c.resolvePlan(ctx, creds, offering, plan)
	if err != nil {
		return "", err
	}
	c.plans.put(creds, offering, plan, id)
	return id, nil
}

func (c *Client) resolvePlan(ctx context.Context, creds Credentials, offering, plan string) (string, error) {
	var offerings listJSON[offeringJSON]
	if _, err := c.call(ctx, creds, http.MethodGet, offeringsPath, fieldQuery(eq("catalog_name", offering)), nil, &offerings); err != nil {
		return "", fmt.Errorf("looking up service offering %q: %w", offering, err)
	}
	if len(offerings.Items) == 0 {
		return "", clientkit.Permanent(fmt.Errorf("service offering %q not found", offering))
	}
	for _, o := range offerings.Items {
		var plans listJSON[planJSON]
		q := fieldQuery(eq("catalog_name", plan), eq("service_offering_id", o.ID))
		if _, err := c.call(ctx, creds, http.MethodGet, plansPath, q, nil, &plans); err != nil {
			return "", fmt.Errorf("looking up plan %q of service offering %q: %w", plan, offering, err)
		}
		if len(plans.Items) > 0 {
			return plans.Items[0].ID, nil
		}
	}
	return "", clientkit.Permanent(fmt.Errorf("plan %q of service offering %q not found", plan, offering))
}

// createInstance asks for an asynchronous creation. Service Manager answers 202 with the operation's
// Location (an asynchronous broker) or 201 (a synchronous one); the body is not relied upon, the
// instance is read back instead.
func (c *Client) createInstance(ctx context.Context, creds Credentials, req InstanceRequest, planID string) (*Instance, error) {
	body := instanceRequestJSON{Name: req.Name, ServicePlanID: planID, Parameters: req.Parameters, Labels: req.Labels}
	resp, err := c.call(ctx, creds, http.MethodPost, instancesPath, url.Values{"async": {"true"}}, body, nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusAccepted {
		found, err := c.findInstance(ctx, creds, req.Name)
		if err == nil && found == nil {
			err = errors.New("the created instance is not listed")
		}
		if err != nil {
			return nil, fmt.Errorf("reading the created instance back: %w", err)
		}
		return found, nil
	}
	id, err := instanceIDFromLocation(resp.Header.Get("Location"))
	if err != nil {
		return nil, clientkit.Permanent(err)
	}
	inst, err := c.getInstance(ctx, creds, id)
	if err != nil {
		return nil, fmt.Errorf("reading the created instance %q back: %w", id, err)
	}
	return inst, nil
}

// instanceIDFromLocation takes the instance id out of /v1/service_instances/<id>/operations/<op id>.
func instanceIDFromLocation(loc string) (string, error) {
	u, err := url.Parse(loc)
	if err == nil {
		rest, ok := strings.CutPrefix(u.Path, instancesPath+"/")
		id, _, found := strings.Cut(rest, "/operations/")
		if ok && found && id != "" {
			return id, nil
		}
	}
	return "", fmt.Errorf("unexpected Location %q of the accepted creation", loc)
}

// retry runs attempt until it succeeds, fails permanently, or has made its attempts within the
// call\'s budget, sleeping with jittered exponential backoff between attempts; while the system is
// down it fails at once.
func (c *Client) retry(ctx context.Context, op string, attempt func(context.Context) error) error {
	return c.caller.Retry(ctx, op, attempt)
}

// call makes one request authenticated with creds; in and out are JSON bodies, either may be nil.
// When Service Manager rejects a token it still considers valid, it fetches a new one and tries once more.
func (c *Client) call(ctx context.Context, creds Credentials, method, path string, query url.Values, in, out any) (*http.Response, error) {
	var resp *http.Response
	base := strings.TrimRight(creds.URL, "/")
	err := c.tokensFor(creds).Authorized(ctx, func(tok *oauth2.Token) error {
		var err error
		resp, err = clientkit.DoJSON(ctx, c.http, tok.SetAuthHeader, method, base, path, query, in, out)
		return err
	})
	return resp, err
}

// tokensFor returns the token source of creds, so that each set of credentials fetches its token once
// and not once per call.
func (c *Client) tokensFor(creds Credentials) *clientkit.Tokens {
	key := tokenKey{tokenURL: strings.TrimRight(creds.TokenURL, "/"), clientID: creds.ClientID, clientSecret: creds.ClientSecret}
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tokens[key]
	if !ok {
		t = clientkit.NewTokens(c.http, key.tokenURL+"/oauth/token", creds.ClientID, creds.ClientSecret)
		c.tokens[key] = t
	}
	return t
}

type required struct{ what, val string }

// check reports unusable credentials and missing arguments before anything is sent.
func check(creds Credentials, args ...required) error {
	var errs []error
	for _, a := range args {
		if strings.TrimSpace(a.val) == "" {
			errs = append(errs, errors.New(a.what+" is empty"))
		}
	}
	if err := validateCredentials(creds, "the credentials' URL (sm_url)", "the credentials' token URL (url)", "the credentials' client id"); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// fieldQuery is the fieldQuery parameter matching all of conds.
func fieldQuery(conds ...string) url.Values {
	return url.Values{"fieldQuery": {strings.Join(conds, " and ")}}
}

// eq is the fieldQuery condition field = value; a quote in value is doubled, as Service Manager expects.
func eq(field, value string) string {
	return field + " eq '" + strings.ReplaceAll(value, "'", "''") + "'"
}

func newCaller(cfg Config) *clientkit.Caller {
	return clientkit.NewCaller("servicemanager", cfg.RetryInitialBackoff, cfg.RetryMaxBackoff, cfg.Calls, cfg.Metrics)
}
