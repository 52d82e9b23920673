// Package contracttest checks a client's requests against a fixture of a real system's published
// contract: the operations (method and path template), the request bodies' required fields and
// their JSON types, and enums. A fixture is a JSON file in the client's testdata/ that cites the
// repository, path and commit its facts come from; the facts are restated, not copied.
package contracttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
)

// Source cites where a fixture's facts come from.
type Source struct {
	Repository string `json:"repository"`
	Path       string `json:"path"`
	Commit     string `json:"commit"`
}

// Operation is one endpoint the client may call.
type Operation struct {
	Name   string `json:"name"`
	Method string `json:"method"`
	// Path is a template relative to the client's base URL; {name} matches one path segment.
	Path string `json:"path"`
	// Body names the schema of the request body; empty for none.
	Body string `json:"body,omitempty"`
	// ContentType, when set, is the request's required media type.
	ContentType string `json:"contentType,omitempty"`
	// Query lists the query parameters the request must carry.
	Query []string `json:"query,omitempty"`
	// Responses are the status codes the system documents for the operation.
	Responses []int `json:"responses,omitempty"`
}

// Schema is an object's required fields and its fields' types. A type is a JSON type (string,
// integer, number, boolean, object, array), "scalar" (string, boolean or number), "array:<type>",
// or "#<schema>" for a nested object of that schema (also inside arrays: "array:#<schema>").
type Schema struct {
	Required   []string          `json:"required"`
	Properties map[string]string `json:"properties"`
}

// Fixture is the contract of one system as the client relies on it.
type Fixture struct {
	Sources    []Source            `json:"sources"`
	Operations []Operation         `json:"operations"`
	Schemas    map[string]Schema   `json:"schemas"`
	Enums      map[string][]string `json:"enums,omitempty"`
	// Facts are further facts the client or stand-in relies on, by name.
	Facts map[string]any `json:"facts,omitempty"`
}

// Load reads a fixture; every fixture must cite its sources with a commit.
func Load(t testing.TB, path string) Fixture {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the contract fixture: %v", err)
	}
	var f Fixture
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("decoding the contract fixture %s: %v", path, err)
	}
	if len(f.Sources) == 0 {
		t.Fatalf("contract fixture %s cites no source", path)
	}
	for _, s := range f.Sources {
		if s.Repository == "" || s.Path == "" || len(s.Commit) != 40 {
			t.Fatalf("contract fixture %s: source %+v lacks repository, path or a full commit", path, s)
		}
	}
	return f
}

// Request is one request a client sent.
type Request struct {
	Method      string
	Path        string // relative to the recorder's base
	Query       map[string][]string
	ContentType string
	Header      http.Header
	Body        []byte
}

// Recorder is a loopback HTTP server that records every request and answers with Answer.
type Recorder struct {
	URL    string
	mu     sync.Mutex
	reqs   []Request
	answer func(w http.ResponseWriter, r Request)
}

// NewRecorder starts a loopback server; answer writes each response (nil answers 200 with {}).
func NewRecorder(t testing.TB, answer func(w http.ResponseWriter, r Request)) *Recorder {
	t.Helper()
	rec := &Recorder{answer: answer}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := ReadRequest(r)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, req)
		rec.mu.Unlock()
		if rec.answer == nil {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte("{}"))
			return
		}
		rec.answer(w, req)
	}))
	t.Cleanup(srv.Close)
	rec.URL = srv.URL
	return rec
}

// Requests returns the requests recorded so far.
func (r *Recorder) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}

// Match returns the operation of the fixture a request's method and path (with prefix removed) are.
func (f Fixture) Match(method, path, prefix string) (Operation, bool) {
	path = strings.TrimPrefix(path, prefix)
	for _, op := range f.Operations {
		if op.Method == method && matchPath(op.Path, path) {
			return op, true
		}
	}
	return Operation{}, false
}

func matchPath(tmpl, path string) bool {
	ts, ps := strings.Split(strings.Trim(tmpl, "/"), "/"), strings.Split(strings.Trim(path, "/"), "/")
	if len(ts) != len(ps) {
		return false
	}
	for i := range ts {
		if strings.HasPrefix(ts[i], "{") && strings.HasSuffix(ts[i], "}") {
			if ps[i] == "" {
				return false
			}
			continue
		}
		if ts[i] != ps[i] {
			return false
		}
	}
	return true
}

// Check returns what in req violates the fixture: an operation it does not document, a missing
// query parameter, a wrong media type, and the body's missing required fields and wrong types.
func (f Fixture) Check(req Request, prefix string) []string {
	op, ok := f.Match(req.Method, req.Path, prefix)
	if !ok {
		return []string{fmt.Sprintf("%s %s is no operation of the contract", req.Method, strings.TrimPrefix(req.Path, prefix))}
	}
	var out []string
	for _, q := range op.Query {
		if _, ok := req.Query[q]; !ok {
			out = append(out, fmt.Sprintf("%s: query parameter %s is missing", op.Name, q))
		}
	}
	if op.ContentType != "" && !strings.HasPrefix(req.ContentType, op.ContentType) {
		out = append(out, fmt.Sprintf("%s: content type %q, want %q", op.Name, req.ContentType, op.ContentType))
	}
	if op.Body == "" {
		return out
	}
	var body any
	d := json.NewDecoder(bytes.NewReader(req.Body))
	d.UseNumber()
	if err := d.Decode(&body); err != nil {
		return append(out, fmt.Sprintf("%s: body is not JSON: %v", op.Name, err))
	}
	return append(out, f.Validate(body, "#"+op.Body, op.Name)...)
}

// Validate returns the violations of value against a type of the fixture (see Schema), at path.
func (f Fixture) Validate(value any, typ, at string) []string {
	switch {
	case strings.HasPrefix(typ, "#"):
		obj, ok := value.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want an object, got %s", at, jsonType(value))}
		}
		s, ok := f.Schemas[typ[1:]]
		if !ok {
			return []string{fmt.Sprintf("%s: the fixture has no schema %s", at, typ[1:])}
		}
		var out []string
		for _, r := range s.Required {
			if _, ok := obj[r]; !ok {
				out = append(out, fmt.Sprintf("%s.%s: required, missing", at, r))
			}
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if t, ok := s.Properties[k]; ok {
				out = append(out, f.Validate(obj[k], t, at+"."+k)...)
			}
		}
		return out
	case strings.HasPrefix(typ, "array:"):
		arr, ok := value.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want an array, got %s", at, jsonType(value))}
		}
		var out []string
		for i, v := range arr {
			out = append(out, f.Validate(v, typ[len("array:"):], fmt.Sprintf("%s[%d]", at, i))...)
		}
		return out
	case strings.HasPrefix(typ, "enum:"):
		s, ok := value.(string)
		if !ok {
			return []string{fmt.Sprintf("%s: want a string of enum %s, got %s", at, typ[5:], jsonType(value))}
		}
		for _, v := range f.Enums[typ[5:]] {
			if v == s {
				return nil
			}
		}
		return []string{fmt.Sprintf("%s: %q is no value of enum %s", at, s, typ[5:])}
	}
	got := jsonType(value)
	switch {
	case typ == got, typ == "number" && got == "integer", typ == "any":
		return nil
	case typ == "scalar" && (got == "string" || got == "boolean" || got == "integer" || got == "number"):
		return nil
	}
	return []string{fmt.Sprintf("%s: want %s, got %s", at, typ, got)}
}

func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number:
		if _, err := v.Int64(); err == nil {
			return "integer"
		}
		return "number"
	case float64:
		if v == float64(int64(v)) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}
