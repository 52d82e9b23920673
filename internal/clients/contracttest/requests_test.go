package contracttest

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRequestShapeCheck(t *testing.T) {
	shapes := []RequestShape{
		{Name: "create", Method: http.MethodPost, Path: "/tenants/{id}", ContentType: "application/json",
			JSON: &FieldSet{Required: []string{"name", "config.uris"}, Optional: []string{"config"}}},
		{Name: "token", Method: http.MethodPost, Path: "/token", ContentType: "application/x-www-form-urlencoded",
			Form: &FieldSet{Required: []string{"grant_type"}, Optional: []string{"scope"}}},
		{Name: "delete", Method: http.MethodDelete, Path: "/tenants/{id}", Query: &FieldSet{Required: []string{"force"}}, NoBody: true},
	}
	req := func(method, path, query, ct, body string) Request {
		r, err := http.NewRequest(method, "http://x"+path+query, nil)
		require.NoError(t, err)
		return Request{Method: method, Path: r.URL.Path, Query: r.URL.Query(), ContentType: ct, Body: []byte(body)}
	}
	for _, c := range []struct {
		name, want, wrong string
		r                 Request
	}{
		{name: "fits", want: "create", r: req("POST", "/tenants/a", "", "application/json; charset=utf-8", `{"name":"a","config":{"uris":["u"]}}`)},
		{name: "missing nested", wrong: "JSON field config.uris is missing", r: req("POST", "/tenants/a", "", "application/json", `{"name":"a","config":{}}`)},
		{name: "empty required", wrong: "JSON field name is missing", r: req("POST", "/tenants/a", "", "application/json", `{"name":"","config":{"uris":[]}}`)},
		{name: "extra field", wrong: "JSON field tags is not in the contract", r: req("POST", "/tenants/a", "", "application/json", `{"name":"a","config":{"uris":1},"tags":""}`)},
		{name: "media type", wrong: `content type "text/plain", want "application/json"`, r: req("POST", "/tenants/a", "", "text/plain", `{}`)},
		{name: "empty segment", wrong: "no request of the contract", r: req("POST", "/tenants/", "", "application/json", `{}`)},
		{name: "form", want: "token", r: req("POST", "/token", "", "application/x-www-form-urlencoded", "grant_type=password&scope=a")},
		{name: "form extra", wrong: "form field username is not in the contract", r: req("POST", "/token", "", "application/x-www-form-urlencoded", "grant_type=password&username=u")},
		{name: "no body", wrong: "a body where none belongs", r: req("DELETE", "/tenants/a", "?force=true", "", "{}")},
		{name: "query missing", wrong: "query field force is missing", r: req("DELETE", "/tenants/a", "", "", "")},
		{name: "query extra", wrong: "query field dry is not in the contract", r: req("DELETE", "/tenants/a", "?force=1&dry=1", "", "")},
	} {
		t.Run(c.name, func(t *testing.T) {
			name, err := MatchRequest(shapes, c.r)
			if c.wrong != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.wrong)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, name)
		})
	}
}
