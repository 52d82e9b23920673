package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// client calls the operator API with the configured credentials.
type client struct {
	cfg  Config
	http *http.Client
}

func newClient(cfg Config, timeout time.Duration) *client {
	return &client{cfg: cfg, http: &http.Client{Timeout: timeout}}
}

// APIError is an answer other than 2xx, with what the broker said.
type APIError struct {
	Method, Path string
	Status       int
	Message      string
}

func (e *APIError) Error() string {
	switch e.Status {
	case http.StatusUnauthorized:
		return fmt.Sprintf("unauthorized (401) on %s %s: the broker refused the credentials; set --username and --password (KCP_USERNAME, KCP_PASSWORD) or --token (KCP_TOKEN), or run kcp login (its client ID must be the broker's APP_BROKER_OIDC_AUDIENCE)", e.Method, e.Path)
	case http.StatusForbidden:
		return fmt.Sprintf("forbidden (403) on %s %s: the credentials are valid but may not use the operator API (an operator group is required): %s", e.Method, e.Path, e.Message)
	case http.StatusNotFound:
		return fmt.Sprintf("not found (404): %s %s: %s", e.Method, e.Path, e.Message)
	}
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), e.Message)
}

// do sends body (JSON, when not nil) and returns the answer's body of a 2xx.
func (c *client) do(ctx context.Context, method, path string, query url.Values, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encoding the request: %w", err)
		}
		rd = bytes.NewReader(raw)
	}
	target := c.cfg.URL + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, fmt.Errorf("building the request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	switch {
	case c.cfg.login != nil:
		tok, err := c.cfg.login.token(ctx)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	case c.cfg.Token != "":
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	case c.cfg.Username != "" || c.cfg.Password != "":
		req.SetBasicAuth(c.cfg.Username, c.cfg.Password)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, &APIError{Method: method, Path: path, Status: resp.StatusCode, Message: message(raw)}
	}
	return raw, nil
}

// getJSON decodes a 2xx answer into out.
func (c *client) getJSON(ctx context.Context, method, path string, query url.Values, body, out any) error {
	raw, err := c.do(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

// message is the broker's error text: {"error": ...} or {"description": ...}, else the body.
func message(raw []byte) string {
	var e struct {
		Error       string `json:"error"`
		Description string `json:"description"`
	}
	if json.Unmarshal(raw, &e) == nil {
		if e.Error != "" {
			return e.Error
		}
		if e.Description != "" {
			return e.Description
		}
	}
	s := strings.TrimSpace(string(raw))
	if len(s) > 500 {
		s = s[:500] + "..."
	}
	return s
}

// listPage is one page of a list the broker pages (page, page_size; data, totalCount).
type listPage[T any] struct {
	Data       []T `json:"data"`
	TotalCount int `json:"totalCount"`
}

// readPages reads path's list from page first, size items a page: that page only, or with all
// every page after it too. It returns the items and the list's total.
func readPages[T any](ctx context.Context, c *client, path string, q url.Values, first, size int, all bool) ([]T, int, error) {
	q = maps.Clone(q)
	if q == nil {
		q = url.Values{}
	}
	q.Set("page_size", strconv.Itoa(size))
	var items []T
	for p := first; ; p++ {
		q.Set("page", strconv.Itoa(p))
		var one listPage[T]
		if err := c.getJSON(ctx, http.MethodGet, path, q, nil, &one); err != nil {
			return nil, 0, err
		}
		items = append(items, one.Data...)
		if !all || len(one.Data) == 0 || p*size >= one.TotalCount {
			return items, one.TotalCount, nil
		}
	}
}
