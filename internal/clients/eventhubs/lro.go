package eventhubs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/httpbody"
	"golang.org/x/oauth2"
)

// The namespace PUT is one of ARM's long-running operations (x-ms-long-running-operation in
// Microsoft.EventHub 2021-11-01): besides 200/201 with the namespace it may answer 202 Accepted
// with an empty body and the operation's URLs in the Azure-AsyncOperation and Location headers
// (ARM's async API reference; facts in testdata/contract.json). The client makes one bounded
// request per call and hands the wait back to its caller, which keeps the URLs durably.

// Operation is a long-running ARM operation in progress: the URLs ARM answered 202 Accepted with.
// Callers keep it durably and pass it back (NamespaceRequest.Operation) so that the next call,
// after a restart too, follows the same operation. Losing it is harmless: the PUT is idempotent.
type Operation struct {
	// AsyncOperation is the Azure-AsyncOperation URL, an operation resource whose status tells
	// how the operation goes; followed in preference to Location.
	AsyncOperation string
	// Location is the Location URL: 202 while the operation runs, then its result.
	Location string
}

func (o *Operation) empty() bool { return o == nil || (o.AsyncOperation == "" && o.Location == "") }

// Statuses of an ARM asynchronous operation besides the provisioning states: any status that is
// not terminal (Succeeded, Failed, Canceled) means the operation still runs.
const (
	StateAccepted   = "Accepted"
	StateInProgress = "InProgress"
	StateCanceled   = "Canceled"
)

// Bounds of the wait between polls. ARM asks clients to wait for Retry-After (whole seconds; its
// providers send 10s to 10min) and for 60s when there is none.
const (
	DefaultRetryAfter = time.Minute
	MinRetryAfter     = time.Second
	MaxRetryAfter     = 10 * time.Minute
)

// errOperationGone: ARM no longer knows the operation (404): the PUT is issued again.
var errOperationGone = errors.New("ARM does not know the operation")

// operationStatus is the Azure-AsyncOperation resource.
type operationStatus struct {
	Status string `json:"status"`
	Error  *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// answer is an ARM response read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// send makes one authenticated ARM request to the absolute URL u; in is a JSON body or nil. A
// non-2xx answer is a *clientkit.StatusError.
func (c *Client) send(ctx context.Context, method, u string, in any) (*answer, error) {
	var out *answer
	err := c.tokens.authorized(ctx, func(tok *oauth2.Token) error {
		a, err := doRaw(ctx, c.http, tok.SetAuthHeader, method, u, in)
		out = a
		return err
	})
	return out, err
}

func doRaw(ctx context.Context, httpc *http.Client, authorize func(*http.Request), method, u string, in any) (*answer, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, clientkit.Permanent(fmt.Errorf("encoding request: %w", err))
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, clientkit.Permanent(err)
	}
	authorize(req)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	clientkit.NoteAnswer(ctx, resp.StatusCode)
	const maxResponse = 8 << 20
	data, err := httpbody.Read(io.LimitReader(resp.Body, maxResponse), resp.ContentLength, maxResponse)
	if err != nil {
		return nil, fmt.Errorf("reading response: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, clientkit.NewStatusError(resp, bytes.TrimSpace(data))
	}
	return &answer{status: resp.StatusCode, header: resp.Header, body: data}, nil
}

// armURL checks that u, a URL ARM handed out, is an absolute URL under the configured ARM URL:
// the client's token goes nowhere else.
func (c *Client) armURL(u string) error {
	base, err := url.Parse(c.cfg.ARMURL)
	if err != nil {
		return err
	}
	p, err := url.Parse(u)
	switch {
	case err != nil:
		return fmt.Errorf("%q is no URL: %w", u, err)
	case !p.IsAbs() || p.Scheme != base.Scheme || !strings.EqualFold(p.Host, base.Host) || !strings.HasPrefix(p.Path, base.Path+"/"):
		return fmt.Errorf("%q is not under the ARM URL %s", u, c.cfg.ARMURL)
	}
	return nil
}

// accepted reads a 202 Accepted: the operation's URLs, checked, and the wait.
func (c *Client) accepted(h http.Header) (*Operation, time.Duration, error) {
	op := &Operation{AsyncOperation: h.Get("Azure-AsyncOperation"), Location: h.Get("Location")}
	for _, u := range []struct{ name, val string }{{"Azure-AsyncOperation", op.AsyncOperation}, {"Location", op.Location}} {
		if u.val == "" {
			continue
		}
		if err := c.armURL(u.val); err != nil {
			return nil, 0, clientkit.Permanent(fmt.Errorf("ARM answered 202 Accepted with a %s header the client does not follow: %w", u.name, err))
		}
	}
	if op.empty() {
		op = nil // nothing to follow: the next call looks the namespace up and PUTs it again if need be
	}
	return op, RetryAfter(h), nil
}

// RetryAfter is the wait a Retry-After header (whole seconds, as ARM sends it) asks for, bounded
// to [MinRetryAfter, MaxRetryAfter]; DefaultRetryAfter when there is none or it is no number.
func RetryAfter(h http.Header) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After")))
	if err != nil || n < 0 {
		return DefaultRetryAfter
	}
	return min(max(time.Duration(n)*time.Second, MinRetryAfter), MaxRetryAfter)
}

// pending is the namespace while ARM creates it.
func pending(req NamespaceRequest, state string, op *Operation, wait time.Duration) *Namespace {
	return &Namespace{Name: req.Name, ResourceGroup: req.ResourceGroup, Region: req.Region, ProvisioningState: state,
		Operation: op, RetryAfter: wait}
}

// poll makes one request about the operation op: the Azure-AsyncOperation URL when there is one,
// else the Location URL. It returns the namespace, pending while the operation runs;
// errOperationGone when ARM no longer knows the operation; a permanent error naming Azure's code
// and message when the operation failed or was canceled.
func (c *Client) poll(ctx context.Context, req NamespaceRequest, op *Operation) (*Namespace, error) {
	if op.AsyncOperation != "" {
		return c.pollAsyncOperation(ctx, req, op)
	}
	return c.pollLocation(ctx, req, op)
}

func (c *Client) pollAsyncOperation(ctx context.Context, req NamespaceRequest, op *Operation) (*Namespace, error) {
	if c.armURL(op.AsyncOperation) != nil {
		return nil, errOperationGone // kept from another configuration: start over rather than send the token elsewhere
	}
	a, err := c.send(ctx, http.MethodGet, op.AsyncOperation, nil)
	switch {
	case clientkit.StatusOf(err) == http.StatusNotFound:
		return nil, errOperationGone
	case err != nil:
		// A failure to read the status, not of the operation.
		return nil, fmt.Errorf("reading the status of the namespace's creation: %w", err)
	}
	var st operationStatus
	if err := json.Unmarshal(a.body, &st); err != nil || st.Status == "" {
		return nil, clientkit.Permanent(fmt.Errorf("the status of the namespace's creation is unreadable: %q", truncate(a.body)))
	}
	switch {
	case strings.EqualFold(st.Status, StateSucceeded):
		ns, err := c.getNamespace(ctx, req.ResourceGroup, req.Name)
		switch {
		case missing(err, codeResourceGroupNotFound, codeResourceNotFound):
			return nil, errOperationGone
		case err != nil:
			return nil, fmt.Errorf("looking up the created namespace: %w", err)
		}
		return ns.toNamespace(req.ResourceGroup), nil
	case strings.EqualFold(st.Status, StateFailed), strings.EqualFold(st.Status, StateCanceled):
		return nil, operationFailed(st)
	}
	return pending(req, st.Status, op, RetryAfter(a.header)), nil
}

func (c *Client) pollLocation(ctx context.Context, req NamespaceRequest, op *Operation) (*Namespace, error) {
	if c.armURL(op.Location) != nil {
		return nil, errOperationGone
	}
	a, err := c.send(ctx, http.MethodGet, op.Location, nil)
	switch {
	case clientkit.StatusOf(err) == http.StatusNotFound:
		return nil, errOperationGone
	case err != nil && (transient(err) || clientkit.StatusOf(err) == http.StatusUnauthorized || clientkit.StatusOf(err) == http.StatusForbidden):
		return nil, fmt.Errorf("reading the result of the namespace's creation: %w", err)
	case err != nil:
		// The result of a finished operation is what the PUT would have answered: here its failure.
		return nil, fmt.Errorf("Azure reports that creating the namespace failed (%s): %w", codeMessage(err), err)
	case a.status == http.StatusAccepted:
		next := *op
		if l := a.header.Get("Location"); l != "" && c.armURL(l) == nil {
			next.Location = l
		}
		return pending(req, StateInProgress, &next, RetryAfter(a.header)), nil
	}
	var ns namespaceResource
	if json.Unmarshal(a.body, &ns) == nil && ns.Name != "" {
		return ns.toNamespace(req.ResourceGroup), nil
	}
	got, err := c.getNamespace(ctx, req.ResourceGroup, req.Name)
	switch {
	case missing(err, codeResourceGroupNotFound, codeResourceNotFound):
		return nil, errOperationGone
	case err != nil:
		return nil, fmt.Errorf("looking up the created namespace: %w", err)
	}
	return got.toNamespace(req.ResourceGroup), nil
}

func transient(err error) bool {
	temporary, _ := clientkit.Classify(err)
	return temporary
}

// operationFailed is a failed or canceled operation: permanent, naming Azure's code and message.
func operationFailed(st operationStatus) error {
	code, msg := "no error code", "no message"
	if st.Error != nil {
		if st.Error.Code != "" {
			code = st.Error.Code
		}
		if st.Error.Message != "" {
			msg = st.Error.Message
		}
	}
	return clientkit.Permanent(fmt.Errorf("Azure reports the namespace's creation %s: %s: %s", st.Status, code, msg))
}

// codeMessage is "code: message" of an ARM error answer in err.
func codeMessage(err error) string {
	var se *clientkit.StatusError
	if !errors.As(err, &se) {
		return "no error code"
	}
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal([]byte(se.Body), &body) != nil || body.Error.Code == "" {
		return fmt.Sprintf("HTTP %d", se.Code)
	}
	return body.Error.Code + ": " + body.Error.Message
}

func truncate(b []byte) string {
	const n = 200
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
