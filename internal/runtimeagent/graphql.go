package runtimeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
)

// graphqlClient posts GraphQL requests to the Director over the agent's mutual-TLS client.
type graphqlClient struct {
	http *http.Client
}

// call posts query with vars to url with the tenant header and decodes data.result into out
// (when not nil). Errors name the Director and its answer.
func (g graphqlClient) call(ctx context.Context, url, tenant, query string, vars map[string]any, out any) error {
	var resp struct {
		Data   map[string]json.RawMessage `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	setTenant := func(r *http.Request) { r.Header.Set("Tenant", tenant) }
	if _, err := clientkit.DoJSON(ctx, g.http, setTenant, http.MethodPost, url, "", nil, map[string]any{"query": query, "variables": vars}, &resp); err != nil {
		return fmt.Errorf("the Director at %s: %w", url, err)
	}
	if len(resp.Errors) > 0 {
		msgs := make([]string, 0, len(resp.Errors))
		for _, e := range resp.Errors {
			msgs = append(msgs, e.Message)
		}
		return fmt.Errorf("the Director at %s answered: %s", url, strings.Join(msgs, "; "))
	}
	if out == nil {
		return nil
	}
	result, ok := resp.Data["result"]
	if !ok || string(result) == "null" {
		return fmt.Errorf("the Director at %s answered without a result", url)
	}
	if err := json.Unmarshal(result, out); err != nil {
		return fmt.Errorf("the Director at %s: decoding the result: %w", url, err)
	}
	return nil
}
