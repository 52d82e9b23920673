// Package avs is the client of SAP's Availability Service (AVS) evaluation API: it creates, tags,
// links and deletes the evaluations that monitor a runtime. Calls authenticate with OAuth2 client
// credentials, are retried with backoff on transient failures only (network errors, 429, 5xx) a few times within a call's budget (clientkit.Calls), and are idempotent: creation first looks for an evaluation of the same name,
// deletion of a missing evaluation succeeds.
package avs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"golang.org/x/oauth2"
)

const evaluationPath = "/api/v2/evaluationmetadata"

// Tag is an evaluation tag.
type Tag struct {
	Content      string `json:"content"`
	TagClassID   int64  `json:"tag_class_id"`
	TagClassName string `json:"tag_class_name,omitempty"`
}

// EvaluationRequest describes an evaluation to create.
type EvaluationRequest struct {
	Name             string `json:"name"`
	Description      string `json:"description"`
	DefinitionType   string `json:"definition_type"`
	URL              string `json:"url"`
	CheckType        string `json:"check_type"`
	Interval         int32  `json:"interval"`
	TesterAccessID   int64  `json:"tester_access_id"`
	Timeout          int    `json:"timeout"`
	ReadOnly         bool   `json:"read_only"`
	ContentCheck     string `json:"content_check"`
	ContentCheckType string `json:"content_check_type"`
	Threshold        int64  `json:"threshold"`
	GroupID          int64  `json:"group_id"`
	Visibility       string `json:"visibility"`
	ParentID         int64  `json:"parent_id"`
	Tags             []Tag  `json:"tags"`
}

// Evaluation is an evaluation as AVS returns it.
type Evaluation struct {
	ID               int64  `json:"id"`
	Name             string `json:"name"`
	Description      string `json:"description"`
	DefinitionType   string `json:"definition_type"`
	URL              string `json:"url"`
	CheckType        string `json:"check_type"`
	Interval         int32  `json:"interval"`
	TesterAccessID   int64  `json:"tester_access_id"`
	Timeout          int    `json:"timeout"`
	ReadOnly         bool   `json:"read_only"`
	ContentCheck     string `json:"content_check"`
	ContentCheckType string `json:"content_check_type"`
	Threshold        int64  `json:"threshold"`
	GroupID          int64  `json:"group_id"`
	Visibility       string `json:"visibility"`
	ParentID         int64  `json:"parent_id"`
	Tags             []Tag  `json:"tags"`
	Status           string `json:"status"`
	Owner            string `json:"owner"`
	CreatedAt        int64  `json:"created_at"`
}

// Client calls the AVS evaluation API. It is safe for concurrent use.
type Client struct {
	cfg    Config
	caller *clientkit.Caller
	base   string
	http   *http.Client
	tokens *clientkit.Tokens
}

// New returns a client for cfg; zero Timeout and backoff settings take their defaults.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("AVS configuration: %w", err)
	}
	cfg.withDefaults()
	httpc := clientkit.NewHTTPClient(cfg.Timeout, cfg.Metrics.Transport("avs", cfg.Transport))
	return &Client{
		cfg:    cfg,
		caller: newCaller(cfg),
		base:   strings.TrimRight(cfg.URL, "/") + evaluationPath,
		http:   httpc,
		tokens: clientkit.NewTokens(httpc, cfg.OAuthURL, cfg.ClientID, cfg.ClientSecret),
	}, nil
}

// Config returns the configuration in use, defaults applied.
func (c *Client) Config() Config { return c.cfg }

// CreateEvaluation creates the evaluation unless one with the same name exists, in which case it
// returns that one (the oldest, if AVS holds several). Each attempt looks the name up before
// creating, so a retry after a lost response does not create a duplicate. Two concurrent callers
// creating the same name can still race; the broker creates a given name from one operation only.
func (c *Client) CreateEvaluation(ctx context.Context, req *EvaluationRequest) (*Evaluation, error) {
	op := fmt.Sprintf("creating AVS evaluation %q", req.Name)
	if strings.TrimSpace(req.Name) == "" {
		return nil, &Error{Op: op, Err: errors.New("the evaluation name is empty")}
	}
	var out *Evaluation
	err := c.retry(ctx, op, func(ctx context.Context) error {
		found, err := c.find(ctx, req.Name)
		if err != nil {
			return fmt.Errorf("looking up by name: %w", err)
		}
		if found != nil {
			out = found
			return nil
		}
		var created Evaluation
		if err := c.call(ctx, http.MethodPost, "", nil, req, &created); err != nil {
			return err
		}
		out = &created
		return nil
	})
	return out, err
}

// FindEvaluation returns the oldest evaluation with the given name; found is false when there is none.
func (c *Client) FindEvaluation(ctx context.Context, name string) (ev *Evaluation, found bool, err error) {
	err = c.retry(ctx, fmt.Sprintf("looking up AVS evaluation %q", name), func(ctx context.Context) error {
		var err error
		ev, err = c.find(ctx, name)
		return err
	})
	return ev, ev != nil, err
}

func (c *Client) find(ctx context.Context, name string) (*Evaluation, error) {
	var list []Evaluation
	if err := c.call(ctx, http.MethodGet, "", url.Values{"name": {name}}, nil, &list); err != nil {
		return nil, err
	}
	var oldest *Evaluation
	for i := range list {
		if list[i].Name == name && (oldest == nil || list[i].ID < oldest.ID) {
			oldest = &list[i]
		}
	}
	return oldest, nil
}

// GetEvaluation returns the evaluation; a missing one is a permanent error for which IsNotFound is true.
func (c *Client) GetEvaluation(ctx context.Context, id int64) (*Evaluation, error) {
	var out Evaluation
	err := c.retry(ctx, fmt.Sprintf("getting AVS evaluation %d", id), func(ctx context.Context) error {
		return c.call(ctx, http.MethodGet, "/"+strconv.FormatInt(id, 10), nil, nil, &out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteEvaluation deletes the evaluation; deleting a missing one succeeds.
func (c *Client) DeleteEvaluation(ctx context.Context, id int64) error {
	return c.retry(ctx, fmt.Sprintf("deleting AVS evaluation %d", id), func(ctx context.Context) error {
		return clientkit.IgnoreNotFound(c.call(ctx, http.MethodDelete, "/"+strconv.FormatInt(id, 10), nil, nil, nil))
	})
}

// AddTag adds a tag to the evaluation and returns the evaluation; adding a tag it already has is a no-op.
func (c *Client) AddTag(ctx context.Context, id int64, tag Tag) (*Evaluation, error) {
	var out Evaluation
	err := c.retry(ctx, fmt.Sprintf("tagging AVS evaluation %d", id), func(ctx context.Context) error {
		return c.call(ctx, http.MethodPut, "/"+strconv.FormatInt(id, 10)+"/tag", nil, tag, &out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// SetParent makes childID a child of parentID; doing it again is a no-op.
func (c *Client) SetParent(ctx context.Context, parentID, childID int64) error {
	return c.retry(ctx, fmt.Sprintf("linking AVS evaluation %d to parent %d", childID, parentID), func(ctx context.Context) error {
		return c.call(ctx, http.MethodPost, childPath(parentID, childID), nil, nil, nil)
	})
}

// RemoveParent removes childID from parentID's children; a missing parent or child counts as done.
func (c *Client) RemoveParent(ctx context.Context, parentID, childID int64) error {
	return c.retry(ctx, fmt.Sprintf("unlinking AVS evaluation %d from parent %d", childID, parentID), func(ctx context.Context) error {
		return clientkit.IgnoreNotFound(c.call(ctx, http.MethodDelete, childPath(parentID, childID), nil, nil, nil))
	})
}

func childPath(parentID, childID int64) string {
	return "/" + strconv.FormatInt(parentID, 10) + "/child/" + strconv.FormatInt(childID, 10)
}

// retry runs attempt until it succeeds, fails permanently, or has made its attempts within the
// call\'s budget, sleeping with jittered exponential backoff between attempts; while the system is
// down it fails at once.
func (c *Client) retry(ctx context.Context, op string, attempt func(context.Context) error) error {
	return c.caller.Retry(ctx, op, attempt)
}

// call makes one authenticated request; in and out are JSON bodies, either may be nil. When AVS
// rejects a token it still considers valid (AVS restarted, token revoked), it fetches a new token
// and tries once more.
func (c *Client) call(ctx context.Context, method, path string, query url.Values, in, out any) error {
	return c.tokens.Authorized(ctx, func(tok *oauth2.Token) error {
		_, err := clientkit.DoJSON(ctx, c.http, tok.SetAuthHeader, method, c.base, path, query, in, out)
		return err
	})
}

func newCaller(cfg Config) *clientkit.Caller {
	return clientkit.NewCaller("avs", cfg.RetryInitialBackoff, cfg.RetryMaxBackoff, cfg.Calls, cfg.Metrics)
}
