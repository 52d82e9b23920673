package runtimeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// graphqlClient posts GraphQL requests to one system over its own HTTP client (mTLS or not).
type graphqlClient struct {
	system string // named in every error
	http   *http.Client
}

type graphqlError struct {
	Message string `json:"message"`
}

// call posts query to url with the headers and decodes data.result into out (when not nil).
func (g graphqlClient) call(ctx context.Context, url string, headers map[string]string, query string, out any) error {
	body, err := json.Marshal(map[string]any{"query": query})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s: building the request: %w", g.system, err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s at %s: %w", g.system, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return fmt.Errorf("%s at %s: reading the answer: %w", g.system, url, err)
	}
	var answer struct {
		Data   map[string]json.RawMessage `json:"data"`
		Errors []graphqlError             `json:"errors"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil || (resp.StatusCode/100 != 2 && len(answer.Errors) == 0) {
		return fmt.Errorf("%s at %s answered %s: %s", g.system, url, resp.Status, excerpt(raw))
	}
	if len(answer.Errors) > 0 {
		msgs := make([]string, 0, len(answer.Errors))
		for _, e := range answer.Errors {
			msgs = append(msgs, e.Message)
		}
		return fmt.Errorf("%s at %s answered %s: %s", g.system, url, resp.Status, strings.Join(msgs, "; "))
	}
	if out == nil {
		return nil
	}
	result, ok := answer.Data["result"]
	if !ok || string(result) == "null" {
		return fmt.Errorf("%s at %s answered without a result", g.system, url)
	}
	if err := json.Unmarshal(result, out); err != nil {
		return fmt.Errorf("%s at %s: decoding the result: %w", g.system, url, err)
	}
	return nil
}

func excerpt(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// quote makes s a GraphQL string literal (JSON string escaping is valid GraphQL).
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
