// Package director is the client of the Compass Director's GraphQL API for runtimes: it registers,
// labels and unregisters runtimes, sets their status condition, requests one-time tokens for the
// Runtime Agent, and finds a runtime's console URL for the broker. Every call is scoped by tenant
// (the Tenant header) and authenticated with OAuth2 client credentials, is retried with backoff on
// transient failures only (network errors, 429, 5xx, Compass's InternalError) a few times within a call's budget (clientkit.Calls), and is idempotent: registration first looks for the runtime labelled with the
// provisioner's runtime ID, unregistering a missing runtime succeeds.
package director

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/compass"
	"golang.org/x/oauth2"
)

const (
	// RuntimeIDLabel is the label with the provisioner's runtime ID, the natural key of a runtime.
	// The Director accepts only keys of letters, digits and underscores.
	RuntimeIDLabel = "kyma_runtime_id"
	// ConsoleURLLabel is the label with the runtime's console URL, the instance's dashboard URL.
	ConsoleURLLabel = compass.ConsoleURLLabel
)

const (
	queryRuntimeByLabel = `query RuntimeByLabel($filter: [LabelFilter!]) {
	result: runtimes(filter: $filter, first: 1) { data { id name description labels status { condition } } }
}`
	queryRuntime = `query Runtime($id: ID!) {
	result: runtime(id: $id) { id name description labels status { condition } }
}`
	mutationRegister = `mutation RegisterRuntime($in: RuntimeRegisterInput!) {
	result: registerRuntime(in: $in) { id }
}`
	mutationUpdate = `mutation UpdateRuntime($id: ID!, $in: RuntimeUpdateInput!) {
	result: updateRuntime(id: $id, in: $in) { id }
}`
	mutationUnregister = `mutation UnregisterRuntime($id: ID!) {
	result: unregisterRuntime(id: $id) { id }
}`
	mutationToken = `mutation RequestOneTimeToken($id: ID!) {
	result: requestOneTimeTokenForRuntime(id: $id) { token connectorURL }
}`
	queryAuths = `query RuntimeAuths($id: ID!) {
	result: runtime(id: $id) { id auths { id } }
}`
	mutationDeleteAuth = `mutation DeleteSystemAuth($id: ID!) {
	result: deleteSystemAuthForRuntime(authID: $id) { id }
}`
)

// Client calls the Director. It is safe for concurrent use.
type Client struct {
	cfg    Config
	caller *clientkit.Caller
	http   *http.Client
	tokens *clientkit.Tokens
}

var (
	_ compass.Client          = (*Client)(nil)
	_ compass.ConditionReader = (*Client)(nil)
)

// New returns a client for cfg; zero Timeout and backoff settings take their defaults.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("Director configuration: %w", err)
	}
	cfg.withDefaults()
	base := cfg.Transport
	if base == nil && cfg.SkipCertVerify {
		tr := clientkit.PooledTransport()
		// Opted into with APP_SKIP_DIRECTOR_CERT_VERIFICATION, for self-signed development installations.
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec
		base = tr
	}
	httpc := clientkit.NewHTTPClient(cfg.Timeout, cfg.Metrics.Transport("director", base))
	return &Client{
		cfg:    cfg,
		caller: newCaller(cfg),
		http:   httpc,
		tokens: clientkit.NewTokens(httpc, cfg.OAuthTokenURL, cfg.OAuthClientID, cfg.OAuthClientSecret),
	}, nil
}

// Config returns the configuration in use, defaults applied.
func (c *Client) Config() Config { return c.cfg }

type runtime struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	Description *string        `json:"description"`
	Labels      map[string]any `json:"labels"`
	Status      *struct {
		Condition string `json:"condition"`
	} `json:"status"`
}

// RegisterRuntime registers the runtime labelled RuntimeIDLabel=runtimeID, with labels and the
// status condition (empty: Compass's INITIAL), and returns its Compass ID. Each attempt first looks
// for a runtime with that label and returns it if there is one, so a retry after a lost answer does
// not register a duplicate; a runtime found with another condition gets the condition set.
func (c *Client) RegisterRuntime(ctx context.Context, tenant, runtimeID, name, condition string, labels map[string]any) (string, error) {
	op := fmt.Sprintf("registering runtime %s in the Director", runtimeID)
	if err := required(op, "tenant", tenant, "runtime ID", runtimeID, "runtime name", name); err != nil {
		return "", err
	}
	if condition != "" && !conditions[condition] {
		return "", &Error{Op: op, Err: fmt.Errorf("unknown status condition %q", condition)}
	}
	all := make(map[string]any, len(labels)+1)
	for k, v := range labels {
		if !compass.ValidLabelKey(k) {
			return "", &Error{Op: op, Err: fmt.Errorf("the Director refuses the label key %q: only letters, digits and underscores, and not %s", k, compass.ScenariosLabel)}
		}
		all[k] = v
	}
	all[RuntimeIDLabel] = runtimeID
	in := map[string]any{"name": name, "labels": all}
	if condition != "" {
		in["statusCondition"] = condition
	}
	var id string
	err := c.retry(ctx, op, func(ctx context.Context) error {
		found, err := c.findByRuntimeID(ctx, tenant, runtimeID)
		if err != nil {
			return fmt.Errorf("looking up by label %s: %w", RuntimeIDLabel, err)
		}
		if found != nil {
			id = found.ID
			if condition == "" || (found.Status != nil && found.Status.Condition == condition) {
				return nil
			}
			return c.updateCondition(ctx, tenant, found, condition)
		}
		var out struct {
			Result *runtime `json:"result"`
		}
		if err := c.call(ctx, tenant, mutationRegister, map[string]any{"in": in}, &out); err != nil {
			return err
		}
		if out.Result == nil || out.Result.ID == "" {
			return clientkit.Permanent(errors.New("the Director answered without a runtime ID"))
		}
		id = out.Result.ID
		return nil
	})
	return id, err
}

// UpdateRuntimeLabels sets the labels on the runtime, keeping its other labels; setting a label
// to the value it has is a no-op. All labels are set in one request.
func (c *Client) UpdateRuntimeLabels(ctx context.Context, tenant, compassID string, labels map[string]string) error {
	op := fmt.Sprintf("labelling runtime %s in the Director", compassID)
	if err := required(op, "tenant", tenant, "Compass runtime ID", compassID); err != nil {
		return err
	}
	if len(labels) == 0 {
		return nil
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		if !compass.ValidLabelKey(k) {
			return &Error{Op: op, Err: fmt.Errorf("the Director refuses the label key %q: only letters, digits and underscores, and not %s", k, compass.ScenariosLabel)}
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// One setRuntimeLabel per label under an alias; updateRuntime would replace every label.
	var q strings.Builder
	q.WriteString("mutation SetRuntimeLabels($id: ID!")
	vars := map[string]any{"id": compassID}
	for i, k := range keys {
		fmt.Fprintf(&q, ", $k%d: String!, $v%d: Any!", i, i)
		vars[fmt.Sprintf("k%d", i)] = k
		vars[fmt.Sprintf("v%d", i)] = labels[k]
	}
	q.WriteString(") {")
	for i := range keys {
		fmt.Fprintf(&q, "\n\tl%d: setRuntimeLabel(runtimeID: $id, key: $k%d, value: $v%d) { key }", i, i, i)
	}
	q.WriteString("\n}")
	return c.retry(ctx, op, func(ctx context.Context) error {
		return c.call(ctx, tenant, q.String(), vars, nil)
	})
}

// RequestOneTimeToken returns a new one-time token for the runtime's Runtime Agent, revoking every
// earlier one: each attempt first deletes all the runtime's system auths (each token is one), so
// exactly one valid token exists however often this runs, after a crash before the caller kept the
// token or an answer lost on the way.
func (c *Client) RequestOneTimeToken(ctx context.Context, tenant, compassID string) (compass.Token, error) {
	op := fmt.Sprintf("requesting a one-time token for runtime %s from the Director", compassID)
	if err := required(op, "tenant", tenant, "Compass runtime ID", compassID); err != nil {
		return compass.Token{}, err
	}
	var tok compass.Token
	err := c.retry(ctx, op, func(ctx context.Context) error {
		if err := c.deleteAuths(ctx, tenant, compassID); err != nil {
			return fmt.Errorf("revoking earlier tokens: %w", err)
		}
		var out struct {
			Result *struct {
				Token        string `json:"token"`
				ConnectorURL string `json:"connectorURL"`
			} `json:"result"`
		}
		if err := c.call(ctx, tenant, mutationToken, map[string]any{"id": compassID}, &out); err != nil {
			return err
		}
		if out.Result == nil || out.Result.Token == "" {
			return clientkit.Permanent(errors.New("the Director answered without a token"))
		}
		tok = compass.Token{Token: out.Result.Token, ConnectorURL: out.Result.ConnectorURL}
		return nil
	})
	return tok, err
}

// SystemAuths returns the IDs of the runtime's system auths (one per one-time token issued and not
// revoked); the error is one for which IsNotFound is true when there is no such runtime.
func (c *Client) SystemAuths(ctx context.Context, tenant, compassID string) ([]string, error) {
	op := fmt.Sprintf("listing the system auths of runtime %s in the Director", compassID)
	if err := required(op, "tenant", tenant, "Compass runtime ID", compassID); err != nil {
		return nil, err
	}
	var ids []string
	err := c.retry(ctx, op, func(ctx context.Context) error {
		var err error
		ids, err = c.authIDs(ctx, tenant, compassID)
		return err
	})
	return ids, err
}

func (c *Client) authIDs(ctx context.Context, tenant, compassID string) ([]string, error) {
	var out struct {
		Result *struct {
			Auths []struct {
				ID string `json:"id"`
			} `json:"auths"`
		} `json:"result"`
	}
	if err := c.call(ctx, tenant, queryAuths, map[string]any{"id": compassID}, &out); err != nil {
		return nil, fmt.Errorf("reading the runtime's system auths: %w", err)
	}
	if out.Result == nil {
		// The Director answers null for a runtime that does not exist, and it is one service
		// whose registration is committed before its answer (directorschema facts.json,
		// runtimeNotFound): the runtime was unregistered, and asking again would not find it.
		return nil, clientkit.Permanent(fmt.Errorf("runtime %s: %w", compassID, ErrNotFound))
	}
	ids := make([]string, 0, len(out.Result.Auths))
	for _, a := range out.Result.Auths {
		ids = append(ids, a.ID)
	}
	return ids, nil
}

// deleteAuths deletes every system auth of the runtime; one deleted meanwhile counts as deleted.
func (c *Client) deleteAuths(ctx context.Context, tenant, compassID string) error {
	ids, err := c.authIDs(ctx, tenant, compassID)
	if err != nil {
		return err
	}
	for _, id := range ids {
		err := c.call(ctx, tenant, mutationDeleteAuth, map[string]any{"id": id}, nil)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("deleting system auth %s: %w", id, err)
		}
	}
	return nil
}

// UnregisterRuntime unregisters the runtime; unregistering a missing runtime succeeds.
func (c *Client) UnregisterRuntime(ctx context.Context, tenant, compassID string) error {
	op := fmt.Sprintf("unregistering runtime %s from the Director", compassID)
	if err := required(op, "tenant", tenant, "Compass runtime ID", compassID); err != nil {
		return err
	}
	return c.retry(ctx, op, func(ctx context.Context) error {
		err := c.call(ctx, tenant, mutationUnregister, map[string]any{"id": compassID}, nil)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	})
}

var conditions = map[string]bool{
	compass.ConditionInitial: true, compass.ConditionProvisioning: true,
	compass.ConditionConnected: true, compass.ConditionFailed: true,
}

// SetRuntimeStatusCondition sets the runtime's status condition. The Director has no mutation for
// that alone and its updateRuntime replaces the name, description and labels too, so each attempt
// reads the runtime and writes it back with the new condition; a runtime that already has the
// condition is left alone. A label set between the read and the write would be lost: the
// provisioner changes a runtime from one operation step at a time.
func (c *Client) SetRuntimeStatusCondition(ctx context.Context, tenant, compassID, condition string) error {
	op := fmt.Sprintf("setting the status condition of runtime %s in the Director to %s", compassID, condition)
	if err := required(op, "tenant", tenant, "Compass runtime ID", compassID); err != nil {
		return err
	}
	if !conditions[condition] {
		return &Error{Op: op, Err: fmt.Errorf("unknown status condition %q", condition)}
	}
	return c.retry(ctx, op, func(ctx context.Context) error {
		var got struct {
			Result *runtime `json:"result"`
		}
		if err := c.call(ctx, tenant, queryRuntime, map[string]any{"id": compassID}, &got); err != nil {
			return fmt.Errorf("reading the runtime: %w", err)
		}
		rt := got.Result
		if rt == nil {
			return clientkit.Permanent(fmt.Errorf("runtime %s: %w", compassID, ErrNotFound))
		}
		if rt.Status != nil && rt.Status.Condition == condition {
			return nil
		}
		return c.updateCondition(ctx, tenant, rt, condition)
	})
}

// RuntimeStatusCondition returns the runtime's status condition; the error is one for which
// IsNotFound is true when there is no such runtime.
func (c *Client) RuntimeStatusCondition(ctx context.Context, tenant, compassID string) (string, error) {
	op := fmt.Sprintf("reading the status condition of runtime %s in the Director", compassID)
	if err := required(op, "tenant", tenant, "Compass runtime ID", compassID); err != nil {
		return "", err
	}
	var condition string
	err := c.retry(ctx, op, func(ctx context.Context) error {
		var got struct {
			Result *runtime `json:"result"`
		}
		if err := c.call(ctx, tenant, queryRuntime, map[string]any{"id": compassID}, &got); err != nil {
			return err
		}
		if got.Result == nil {
			return clientkit.Permanent(fmt.Errorf("runtime %s: %w", compassID, ErrNotFound))
		}
		if got.Result.Status != nil {
			condition = got.Result.Status.Condition
		}
		return nil
	})
	return condition, err
}

// updateCondition writes rt back, as just read, with the condition. The labels the Director
// manages (scenarios, which follows the runtime's formations) are left out: it refuses an update
// that names them.
func (c *Client) updateCondition(ctx context.Context, tenant string, rt *runtime, condition string) error {
	labels := make(map[string]any, len(rt.Labels))
	for k, v := range rt.Labels {
		if compass.ValidLabelKey(k) {
			labels[k] = v
		}
	}
	in := map[string]any{"name": rt.Name, "labels": labels, "statusCondition": condition}
	if rt.Description != nil {
		in["description"] = *rt.Description
	}
	return c.call(ctx, tenant, mutationUpdate, map[string]any{"id": rt.ID, "in": in}, nil)
}

// GetConsoleURL returns the console URL of the runtime labelled RuntimeIDLabel=runtimeID; the error
// is one for which IsNotFound is true when there is no such runtime or it has no console URL label.
func (c *Client) GetConsoleURL(ctx context.Context, tenant, runtimeID string) (string, error) {
	op := fmt.Sprintf("getting the console URL of runtime %s from the Director", runtimeID)
	if err := required(op, "tenant", tenant, "runtime ID", runtimeID); err != nil {
		return "", err
	}
	var consoleURL string
	err := c.retry(ctx, op, func(ctx context.Context) error {
		found, err := c.findByRuntimeID(ctx, tenant, runtimeID)
		if err != nil {
			return err
		}
		if found == nil {
			return clientkit.Permanent(fmt.Errorf("no runtime labelled %s=%s: %w", RuntimeIDLabel, runtimeID, ErrNotFound))
		}
		v, ok := found.Labels[ConsoleURLLabel]
		if !ok {
			return clientkit.Permanent(fmt.Errorf("runtime %s has no label %s: %w", found.ID, ConsoleURLLabel, ErrNotFound))
		}
		s, ok := v.(string)
		if !ok || s == "" {
			return clientkit.Permanent(fmt.Errorf("label %s of runtime %s is not a URL: %v", ConsoleURLLabel, found.ID, v))
		}
		consoleURL = s
		return nil
	})
	return consoleURL, err
}

// findByRuntimeID returns the runtime labelled RuntimeIDLabel=runtimeID, nil when there is none.
func (c *Client) findByRuntimeID(ctx context.Context, tenant, runtimeID string) (*runtime, error) {
	// For a key other than scenarios and a few of its own, the Director reads the query as a JSON
	// value the label's value must contain: the runtime ID as a JSON string.
	value, err := json.Marshal(runtimeID)
	if err != nil {
		return nil, clientkit.Permanent(err)
	}
	filter := []map[string]any{{"key": RuntimeIDLabel, "query": string(value)}}
	var out struct {
		Result *struct {
			Data []runtime `json:"data"`
		} `json:"result"`
	}
	if err := c.call(ctx, tenant, queryRuntimeByLabel, map[string]any{"filter": filter}, &out); err != nil {
		return nil, err
	}
	if out.Result == nil || len(out.Result.Data) == 0 {
		return nil, nil
	}
	return &out.Result.Data[0], nil
}

func required(op string, namesAndValues ...string) error {
	var missing []string
	for i := 0; i+1 < len(namesAndValues); i += 2 {
		if strings.TrimSpace(namesAndValues[i+1]) == "" {
			missing = append(missing, namesAndValues[i])
		}
	}
	if len(missing) > 0 {
		return &Error{Op: op, Err: fmt.Errorf("%s required", strings.Join(missing, ", "))}
	}
	return nil
}

// retry runs attempt until it succeeds, fails permanently, or has made its attempts within the
// call\'s budget, sleeping with jittered exponential backoff between attempts; while the system is
// down it fails at once.
func (c *Client) retry(ctx context.Context, op string, attempt func(context.Context) error) error {
	return c.caller.Retry(ctx, op, attempt)
}

type gqlRequest struct {
	Query     string         `json:"query"`
	Variables map[string]any `json:"variables,omitempty"`
}

// call makes one authenticated GraphQL request for tenant and decodes its data into out (which
// may be nil). The Director answers errors with HTTP 200 and an errors list; those are permanent
// but for InternalError. When the gateway rejects a token it still considers valid, it fetches a
// new token and tries once more.
func (c *Client) call(ctx context.Context, tenant, query string, vars map[string]any, out any) error {
	return c.tokens.Authorized(ctx, func(tok *oauth2.Token) error {
		var resp struct {
			Data   json.RawMessage `json:"data"`
			Errors []wireError     `json:"errors"`
		}
		authorize := func(r *http.Request) {
			tok.SetAuthHeader(r)
			r.Header.Set("Tenant", tenant)
		}
		if _, err := clientkit.DoJSON(ctx, c.http, authorize, http.MethodPost, c.cfg.URL, "", nil, gqlRequest{Query: query, Variables: vars}, &resp); err != nil {
			return err
		}
		if len(resp.Errors) > 0 {
			ge := fromWire(resp.Errors)
			if ge.temporary() {
				return ge
			}
			return clientkit.Permanent(ge)
		}
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(resp.Data, out); err != nil {
			return clientkit.Permanent(fmt.Errorf("decoding the Director's data: %w", err))
		}
		return nil
	})
}

func newCaller(cfg Config) *clientkit.Caller {
	return clientkit.NewCaller("director", cfg.RetryInitialBackoff, cfg.RetryMaxBackoff, cfg.Calls, cfg.Metrics)
}
