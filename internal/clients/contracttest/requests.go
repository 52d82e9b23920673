package contracttest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// FieldSet is what one part of a request (query, form or JSON body) must and may carry. JSON
// fields are dotted paths, with [] for an array's elements; any field outside the set breaks the
// contract.
type FieldSet struct {
	Required []string `json:"required"`
	Optional []string `json:"optional"`
}

// RequestShape is one request a client may send, in the "requests" list of fixtures that restate
// what the original broker sent (rather than a system's published schema, which Fixture holds).
// Fixtures may carry further keys (where a fact comes from, notes); they are not decoded here.
type RequestShape struct {
	Name        string    `json:"name"`
	Method      string    `json:"method"`
	Path        string    `json:"path"`
	ContentType string    `json:"contentType"`
	Query       *FieldSet `json:"query"`
	Form        *FieldSet `json:"form"`
	JSON        *FieldSet `json:"json"`
	NoBody      bool      `json:"noBody"`
}

// ReadRequest records an incoming request for Check; it consumes r's body.
func ReadRequest(r *http.Request) Request {
	body, _ := io.ReadAll(r.Body)
	return Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), ContentType: r.Header.Get("Content-Type"),
		Header: r.Header.Clone(), Body: body}
}

func (r Request) String() string {
	return fmt.Sprintf("%s %s?%s (%s) %s", r.Method, r.Path, url.Values(r.Query).Encode(), r.ContentType, r.Body)
}

const otherOperation = "method or path differ"

// Check reports how r differs from the shape; nil when it fits.
func (want RequestShape) Check(r Request) []string {
	if r.Method != want.Method || !matchPath(want.Path, r.Path) {
		return []string{otherOperation}
	}
	var problems []string
	query := map[string]bool{}
	for k, v := range r.Query {
		query[k] = len(v) > 0 && v[0] != ""
	}
	problems = append(problems, checkFields("query", want.Query, query)...)
	if want.NoBody && len(r.Body) > 0 {
		problems = append(problems, "a body where none belongs")
	}
	if want.ContentType != "" {
		if mt, _, err := mime.ParseMediaType(r.ContentType); err != nil || mt != want.ContentType {
			return append(problems, fmt.Sprintf("content type %q, want %q", r.ContentType, want.ContentType))
		}
	}
	switch {
	case want.Form != nil:
		form, err := url.ParseQuery(string(r.Body))
		if err != nil {
			return append(problems, "the form does not parse: "+err.Error())
		}
		have := map[string]bool{}
		for k, v := range form {
			have[k] = len(v) > 0 && v[0] != ""
		}
		problems = append(problems, checkFields("form", want.Form, have)...)
	case want.JSON != nil:
		var v any
		if err := json.Unmarshal(r.Body, &v); err != nil {
			return append(problems, "the JSON body does not parse: "+err.Error())
		}
		have := map[string]bool{}
		jsonPaths("", v, have)
		problems = append(problems, checkFields("JSON", want.JSON, have)...)
	}
	return problems
}

// MatchRequest returns the name of the shape r fits, or why it fits none.
func MatchRequest(shapes []RequestShape, r Request) (string, error) {
	var why []string
	for _, want := range shapes {
		problems := want.Check(r)
		if len(problems) == 0 {
			return want.Name, nil
		}
		if problems[0] != otherOperation {
			why = append(why, want.Name+": "+strings.Join(problems, "; "))
		}
	}
	if len(why) == 0 {
		return "", fmt.Errorf("%s: no request of the contract has this method and path", r)
	}
	return "", fmt.Errorf("%s fits no request of the contract: %s", r, strings.Join(why, " | "))
}

// jsonPaths lists the field paths of a JSON value, each true unless its value is an empty string.
func jsonPaths(prefix string, v any, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out[p] = e != ""
			jsonPaths(p, e, out)
		}
	case []any:
		for _, e := range v {
			jsonPaths(prefix+"[]", e, out)
		}
	}
}

// checkFields reports the required fields missing (or empty) in have and the fields outside the set.
func checkFields(kind string, set *FieldSet, have map[string]bool) []string {
	if set == nil {
		set = &FieldSet{}
	}
	var problems []string
	allowed := map[string]bool{}
	for _, f := range set.Required {
		allowed[f] = true
		if !have[f] {
			problems = append(problems, fmt.Sprintf("%s field %s is missing", kind, f))
		}
	}
	for _, f := range set.Optional {
		allowed[f] = true
	}
	var extra []string
	for f := range have {
		if !allowed[f] {
			extra = append(extra, f)
		}
	}
	sort.Strings(extra)
	for _, f := range extra {
		problems = append(problems, fmt.Sprintf("%s field %s is not in the contract", kind, f))
	}
	return problems
}
