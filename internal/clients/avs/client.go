// Package avs is the client of SAP's Availability Service (AVS) evaluation API as the original
// Kyma Environment Broker called it (testdata/contract.json): it creates, gets, tags, unlinks and
// deletes the evaluations that monitor a runtime. Tokens come from the OAuth2 password grant (the
// original's) or the client-credentials grant (APP_AVS_OAUTH_GRANT). Calls are retried with
// backoff on transient failures a few times within a call's budget (clientkit.Calls).
//
// AVS assigns an evaluation's ID and cannot find an evaluation by name, so a creation is not
// idempotent: CreateEvaluation sends its POST again only when AVS certainly did not take the
// first (no connection, 429, 503, a rejected token); after any other failure the evaluation may
// exist and the error says so (IsOutcomeUnknown). The caller keeps the returned ID durably.
// Deleting a missing evaluation and unlinking an evaluation its parent does not hold succeed.
package avs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
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
	TagClassName string `json:"tag_class_name"`
}

// EvaluationRequest describes an evaluation to create. Every field is sent, as the original
// broker sent them; Threshold goes as a JSON string (the API's type), Service defaults to Name.
type EvaluationRequest struct {
	Name             string `json:"name"`
	Description      string `json:"description"`
	DefinitionType   string `json:"definition_type"`
	Service          string `json:"service"`
	URL              string `json:"url"`
	CheckType        string `json:"check_type"`
	Interval         int32  `json:"interval"`
	TesterAccessID   int64  `json:"tester_access_id"`
	Timeout          int    `json:"timeout"`
	ReadOnly         bool   `json:"read_only"`
	ContentCheck     string `json:"content_check"`
	ContentCheckType string `json:"content_check_type"`
	Threshold        int64  `json:"threshold,string"`
	GroupID          int64  `json:"group_id"`
	Visibility       string `json:"visibility"`
	ParentID         int64  `json:"parent_id"`
	Tags             []Tag  `json:"tags"`
}

// Evaluation is an evaluation as AVS returns it (threshold is a number in answers).
type Evaluation struct {
	ID               int64  `json:"id"`
	Name             string `json:"name"`
	Description      string `json:"description"`
	DefinitionType   string `json:"definition_type"`
	Service          string `json:"service"`
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
	DateCreated      int64  `json:"dateCreated"`
}

// ErrOutcomeUnknown is in the chain of a creation's error when AVS may have created the
// evaluation: the request reached it and no answer told what it did.
var ErrOutcomeUnknown = errors.New("AVS may have created the evaluation: the outcome is unknown")

// IsOutcomeUnknown tells whether err is a creation that may have taken effect.
func IsOutcomeUnknown(err error) bool { return errors.Is(err, ErrOutcomeUnknown) }

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
	tokens := clientkit.NewTokens(httpc, cfg.OAuthURL, cfg.ClientID, cfg.ClientSecret)
	if cfg.OAuthGrant == GrantPassword {
		tokens = clientkit.NewPasswordTokens(httpc, cfg.OAuthURL, cfg.ClientID, cfg.ClientSecret, cfg.OAuthUsername, cfg.OAuthPassword)
	}
	return &Client{
		cfg:    cfg,
		caller: clientkit.NewCaller("avs", cfg.RetryInitialBackoff, cfg.RetryMaxBackoff, cfg.Calls, cfg.Metrics),
		base:   strings.TrimRight(cfg.URL, "/") + evaluationPath,
		http:   httpc,
		tokens: tokens,
	}, nil
}

// Config returns the configuration in use, defaults applied.
func (c *Client) Config() Config { return c.cfg }

// CreateEvaluation creates the evaluation and returns it with the ID AVS gave it. See the package
// documentation for what a failure means: IsOutcomeUnknown(err) when the evaluation may exist.
func (c *Client) CreateEvaluation(ctx context.Context, req *EvaluationRequest) (*Evaluation, error) {
	op := fmt.Sprintf("creating AVS evaluation %q", req.Name)
	if strings.TrimSpace(req.Name) == "" {
		return nil, &Error{Op: op, Err: errors.New("the evaluation name is empty")}
	}
	body := *req
	if body.Service == "" {
		body.Service = body.Name
	}
	if body.Tags == nil {
		body.Tags = []Tag{}
	}
	var out Evaluation
	var unknown *Error
	err := c.retry(ctx, op, func(ctx context.Context) error {
		sent := false
		err := c.call(ctx, http.MethodPost, "", &body, &out, func() { sent = true })
		if err != nil && sent && mayHaveTakenEffect(err) {
			// Sending it again could create a second evaluation: stop here, temporary.
			unknown = &Error{Op: op, System: "avs", StatusCode: clientkit.StatusOf(err), Temporary: true, Err: fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)}
			// Not err itself: its status would have the loop retry it.
			return clientkit.Permanent(ErrOutcomeUnknown)
		}
		return err
	})
	if unknown != nil {
		var e *Error
		if errors.As(err, &e) {
			unknown.Attempts = e.Attempts
		}
		return nil, unknown
	}
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// mayHaveTakenEffect tells whether a request that was sent may have been carried out: any failure
// but a refused connection, a rejection (4xx) and 503, which AVS's gateway answers without
// passing the request on.
func mayHaveTakenEffect(err error) bool {
	switch st := clientkit.StatusOf(err); {
	case st == http.StatusServiceUnavailable, st >= 400 && st < 500:
		return false
	case st != 0:
		return true
	}
	var oe *net.OpError
	return !(errors.As(err, &oe) && oe.Op == "dial")
}

// GetEvaluation returns the evaluation; a missing one is a permanent error for which IsNotFound is true.
func (c *Client) GetEvaluation(ctx context.Context, id int64) (*Evaluation, error) {
	var out Evaluation
	if err := c.do(ctx, fmt.Sprintf("getting AVS evaluation %d", id), http.MethodGet, idPath(id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteEvaluation deletes the evaluation; deleting a missing one succeeds. AVS refuses to delete
// an evaluation its parent holds: RemoveParent first.
func (c *Client) DeleteEvaluation(ctx context.Context, id int64) error {
	return c.retry(ctx, fmt.Sprintf("deleting AVS evaluation %d", id), func(ctx context.Context) error {
		return clientkit.IgnoreNotFound(c.call(ctx, http.MethodDelete, idPath(id), nil, nil, nil))
	})
}

// AddTag adds a tag to the evaluation (POST) and returns the evaluation.
func (c *Client) AddTag(ctx context.Context, id int64, tag Tag) (*Evaluation, error) {
	var out Evaluation
	if err := c.do(ctx, fmt.Sprintf("tagging AVS evaluation %d", id), http.MethodPost, idPath(id)+"/tag", tag, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// notSubevaluation is what AVS answers (400) to unlinking an evaluation its parent does not hold.
const notSubevaluation = "does not contain subevaluation"

// RemoveParent removes childID from parentID's subevaluations; a missing parent, or a child the
// parent does not hold (AVS: 400 "... does not contain subevaluation ..."), counts as done.
func (c *Client) RemoveParent(ctx context.Context, parentID, childID int64) error {
	return c.retry(ctx, fmt.Sprintf("unlinking AVS evaluation %d from parent %d", childID, parentID), func(ctx context.Context) error {
		err := clientkit.IgnoreNotFound(c.call(ctx, http.MethodDelete, idPath(parentID)+"/child/"+strconv.FormatInt(childID, 10), nil, nil, nil))
		var se *clientkit.StatusError
		if errors.As(err, &se) && se.Code == http.StatusBadRequest && strings.Contains(strings.ToLower(se.Body), notSubevaluation) {
			return nil
		}
		return err
	})
}

func idPath(id int64) string { return "/" + strconv.FormatInt(id, 10) }

// do is one retried call of op: in and out are JSON bodies, either may be nil.
func (c *Client) do(ctx context.Context, op, method, path string, in, out any) error {
	return c.retry(ctx, op, func(ctx context.Context) error { return c.call(ctx, method, path, in, out, nil) })
}

// retry runs attempt until it succeeds, fails permanently, or has made its attempts within the
// call's budget, with jittered exponential backoff; while the system is down it fails at once.
func (c *Client) retry(ctx context.Context, op string, attempt func(context.Context) error) error {
	return c.caller.Retry(ctx, op, attempt)
}

// call makes one authenticated request; in and out are JSON bodies, either may be nil; sending,
// when not nil, is called just before the request goes out. When AVS rejects a token it still
// considers valid (AVS restarted, token revoked), it fetches a new token and tries once more.
func (c *Client) call(ctx context.Context, method, path string, in, out any, sending func()) error {
	return c.tokens.Authorized(ctx, func(tok *oauth2.Token) error {
		_, err := clientkit.DoJSON(ctx, c.http, func(r *http.Request) {
			tok.SetAuthHeader(r)
			if sending != nil {
				sending()
			}
		}, method, c.base, path, nil, in, out)
		return err
	})
}
