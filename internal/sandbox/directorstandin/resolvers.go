package directorstandin

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/director/directorschema"
)

// Compass's input limits.
const (
	maxNameLength        = 256
	maxDescriptionLength = 2000
	maxLabelKeyLength    = 256
	maxPageSize          = 200
)

// The Director's input rules (directorschema/facts.json).
var (
	facts       = directorschema.LoadFacts()
	labelKey    = regexp.MustCompile(facts.LabelKey.Pattern)
	runtimeName = regexp.MustCompile(facts.RuntimeName.Pattern)
	// pathQueryValue is a value of a SQL/JSON path query, $[*] ? (@ == "a" || @ == "b"), the form the
	// Director reads for the keys of pathQueryKeys (the Director's ExtractValueFromJSONPath).
	pathQueryValue = regexp.MustCompile(`^\$\[\*\]\s*\?\s*\(\s*@\s*==\s*"(?P<value>[a-zA-Z0-9\-\_\s]+)"\s*|\|\|\s*@\s*==\s*"(?P<value>[a-zA-Z0-9\-\_\s]+)"`)
)

// pathQueryKey tells whether the Director reads a filter's query on key as a SQL/JSON path (only
// scenarios, in any case, and two labels of its own); for every other key it is a JSON value.
func pathQueryKey(key string) bool {
	return strings.EqualFold(key, "scenarios") || key == "runtimeType" || key == "global_system_role"
}

type runtimeInput struct {
	name        string
	description *string
	labels      map[string]any
	condition   string
}

// parseRuntimeInput checks a RuntimeRegisterInput or RuntimeUpdateInput (named by input) as
// their Validate does; gqlparser has already checked its shape and types.
func parseRuntimeInput(input string, v any) (runtimeInput, error) {
	m, _ := v.(map[string]any)
	var in runtimeInput
	name, _ := m["name"].(string)
	switch {
	case strings.TrimSpace(name) == "":
		return in, invalidData(input, "name", "cannot be blank")
	case utf8.RuneCountInString(name) > facts.RuntimeName.MaxRunes:
		return in, invalidData(input, "name", fmt.Sprintf("the length must be between 1 and %d", facts.RuntimeName.MaxRunes))
	case !runtimeName.MatchString(name):
		return in, invalidData(input, "name", "must be in a valid format")
	}
	in.name = name
	if d, ok := m["description"].(string); ok {
		if utf8.RuneCountInString(d) > facts.DescriptionMaxRunes {
			return in, invalidData(input, "description", fmt.Sprintf("the length must be no more than %d", facts.DescriptionMaxRunes))
		}
		in.description = &d
	}
	in.labels = map[string]any{}
	switch l := m["labels"].(type) {
	case nil:
	case map[string]any:
		for k := range l {
			if msg := checkLabelKey(k); msg != "" {
				return in, invalidData(input, "labels", fmt.Sprintf("%s: %s", k, msg))
			}
		}
		for k := range l {
			if refusedLabel(k) {
				return in, internalError(facts.RefusedLabels.Problem)
			}
		}
		for k, val := range l {
			norm, err := normalise(val)
			if err != nil {
				return in, invalidData(input, "labels", fmt.Sprintf("value of %q %v", k, err))
			}
			in.labels[k] = norm
		}
	default:
		return in, invalidData(input, "labels", "must be a JSON object")
	}
	in.condition, _ = m["statusCondition"].(string)
	if in.condition == "" {
		// Compass sets INITIAL when the input has no condition, on update too.
		in.condition = ConditionInitial
	}
	return in, nil
}

// checkLabelKey is what the Director's validation says of a label key, empty when it accepts it.
func checkLabelKey(k string) string {
	switch {
	case k == "":
		return "cannot be blank"
	case utf8.RuneCountInString(k) > facts.LabelKey.MaxRunes:
		return fmt.Sprintf("the length must be no more than %d", facts.LabelKey.MaxRunes)
	case !labelKey.MatchString(k):
		return "must be in a valid format"
	}
	return ""
}

// refusedLabel tells whether the Director refuses to have the label set (it manages scenarios).
func refusedLabel(k string) bool { return slices.Contains(facts.RefusedLabels.Keys, k) }

// normalise turns a label value into plain JSON values (a deep copy), as Compass stores labels as JSON.
func normalise(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("is not JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("is not JSON: %w", err)
	}
	return out, nil
}

// cloneLabels deep-copies labels, whose values are plain JSON values.
func cloneLabels(in map[string]any) map[string]any {
	out := make(map[string]any, len(in))
	for k, v := range in {
		out[k] = cloneJSON(v)
	}
	return out
}

func cloneJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return cloneLabels(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneJSON(e)
		}
		return out
	default:
		return v
	}
}

func (s *StandIn) lookup(tenant string, id any, op string) (*record, error) {
	sid, _ := id.(string)
	rec, ok := s.get(tenant, sid)
	if !ok {
		return nil, notFound("object=runtime; id=%s", sid)
	}
	rec.calls[op]++
	s.touch(rec)
	return rec, nil
}

func (s *StandIn) now() time.Time { return s.opts.Now().UTC() }

// object is the runtime as the API returns it.
func (rec *record) object() object {
	labels := cloneLabels(rec.labels)
	var desc any
	if rec.description != nil {
		desc = *rec.description
	}
	return object{
		"id":          rec.id,
		"name":        rec.name,
		"description": desc,
		"labels": fieldFunc(func(args map[string]any) any {
			key, ok := args["key"].(string)
			if !ok {
				return labels
			}
			out := map[string]any{}
			if v, has := labels[key]; has {
				out[key] = v
			}
			return out
		}),
		"status": object{"condition": rec.status.Condition, "timestamp": rec.status.Timestamp.Format(time.RFC3339)},
		"auths":  rec.authObjects(),
	}
}

func (rec *record) authObjects() []object {
	out := make([]object, 0, len(rec.auths))
	for _, a := range rec.auths {
		out = append(out, object{"id": a.ID})
	}
	return out
}

func (s *StandIn) registerRuntime(tenant string, args map[string]any) (any, error) {
	in, err := parseRuntimeInput("RuntimeRegisterInput", args["in"])
	if err != nil {
		return nil, err
	}
	rec := &record{
		seq: int64(s.seq.Inc(seqRuntimes)), tenant: tenant, id: uuid.NewString(), name: in.name, description: in.description, labels: in.labels,
		status: Status{Condition: in.condition, Timestamp: s.now()}, tokenHashes: map[string]string{}, calls: map[string]int{"registerRuntime": 1},
	}
	s.rts.Create(runtimeKey(rec.tenant, rec.id), rec) // a new UUID: nothing to read
	if rid, ok := rec.labels[RuntimeIDLabel].(string); ok {
		s.registrations.Add(rid, 1)
	}
	return rec.object(), nil
}

func (s *StandIn) updateRuntime(tenant string, args map[string]any) (any, error) {
	rec, err := s.lookup(tenant, args["id"], "updateRuntime")
	if err != nil {
		return nil, err
	}
	in, err := parseRuntimeInput("RuntimeUpdateInput", args["in"])
	if err != nil {
		return nil, err
	}
	// Like Compass, an update replaces the name, description, labels and condition.
	rec.name, rec.description, rec.labels = in.name, in.description, in.labels
	rec.status = Status{Condition: in.condition, Timestamp: s.now()}
	return rec.object(), nil
}

func (s *StandIn) unregisterRuntime(tenant string, args map[string]any) (any, error) {
	rec, err := s.lookup(tenant, args["id"], "unregisterRuntime")
	if err != nil {
		return nil, err
	}
	// Like Compass, a runtime's system auths and application assignments go with it.
	for _, a := range rec.auths {
		s.forgetAuth(rec, a.ID)
	}
	s.unassignEverywhere(rec)
	s.rts.Delete(runtimeKey(tenant, rec.id))
	if rid, ok := rec.labels[RuntimeIDLabel].(string); ok {
		s.unregistrations.Add(rid, 1)
	}
	return rec.object(), nil
}

func (s *StandIn) setRuntimeLabel(tenant string, args map[string]any) (any, error) {
	rec, err := s.lookup(tenant, args["runtimeID"], "setRuntimeLabel")
	if err != nil {
		return nil, err
	}
	// Validated as a LabelInput: a key of the pattern and a value.
	key, _ := args["key"].(string)
	if msg := checkLabelKey(key); msg != "" {
		return nil, invalidData("LabelInput", "key", msg)
	}
	if args["value"] == nil {
		return nil, invalidData("LabelInput", "value", "cannot be blank")
	}
	if refusedLabel(key) {
		return nil, internalError(facts.RefusedLabels.Problem)
	}
	val, err := normalise(args["value"])
	if err != nil {
		return nil, invalidData("LabelInput", "value", err.Error())
	}
	rec.labels[key] = val
	return object{"key": key, "value": cloneJSON(val)}, nil
}

func (s *StandIn) requestOneTimeToken(tenant string, args map[string]any) (any, error) {
	rec, err := s.lookup(tenant, args["id"], "requestOneTimeTokenForRuntime")
	if err != nil {
		return nil, err
	}
	return object{"token": s.issueToken(rec), "connectorURL": s.opts.ConnectorURL}, nil
}

// deleteSystemAuth deletes a system auth of a runtime in the caller's tenant, revoking its token.
func (s *StandIn) deleteSystemAuth(tenant string, args map[string]any) (any, error) {
	id, _ := args["authID"].(string)
	rec, ok := s.byLookup(lookupAuth, id)
	if !ok || rec.tenant != tenant {
		return nil, notFound("object=systemAuth; id=%s", id)
	}
	rec.calls["deleteSystemAuthForRuntime"]++
	s.touch(rec)
	s.forgetAuth(rec, id)
	rec.auths = slices.DeleteFunc(rec.auths, func(a SystemAuth) bool { return a.ID == id })
	return object{"id": id}, nil
}

// runtime answers null for a missing runtime, as Compass does.
func (s *StandIn) runtime(tenant string, args map[string]any) (any, error) {
	rec, err := s.lookup(tenant, args["id"], "runtime")
	if err != nil {
		return nil, nil
	}
	return rec.object(), nil
}

// labelFilter is one filter: with a query, the label's value must contain value (a JSON value)
// or, for a path-query key, be a list holding any of values.
type labelFilter struct {
	key      string
	hasQuery bool
	value    any
	values   []string
}

func (s *StandIn) runtimes(tenant string, args map[string]any) (any, error) {
	filters, err := parseFilters(args["filter"])
	if err != nil {
		return nil, err
	}
	candidates := map[string]*record(nil)
	for _, f := range filters {
		if v, ok := f.value.(string); ok && f.key == RuntimeIDLabel && f.hasQuery {
			candidates = s.rts.Find(lookupRuntimeID, v)
			break
		}
	}
	if candidates == nil {
		candidates = s.rts.All()
	}
	var matched []*record
	for _, rec := range sorted(candidates) {
		if rec.tenant == tenant && matches(rec.labels, filters) {
			matched = append(matched, rec)
		}
	}
	return page(matched, args, func(rec *record) object {
		rec.calls["runtimes"]++
		s.touch(rec)
		return rec.object()
	})
}

// page is the page of items the arguments first and after ask for, each item as fn returns it.
func page[T any](items []T, args map[string]any, fn func(T) object) (object, error) {
	first, offset, err := pageArgs(args)
	if err != nil {
		return nil, err
	}
	end := min(offset+first, len(items))
	out := []object{}
	for _, it := range items[min(offset, end):end] {
		out = append(out, fn(it))
	}
	return pageObject(out, offset, end, len(items)), nil
}

// pageArgs reads the page size (first) and the offset the cursor (after) names.
func pageArgs(args map[string]any) (first, offset int, err error) {
	first, ok := toInt(args["first"])
	if !ok || first < 1 || first > maxPageSize {
		return 0, 0, invalidData("Pagination", "first", fmt.Sprintf("page size must be between 1 and %d", maxPageSize))
	}
	if after, _ := args["after"].(string); after != "" {
		if offset, ok = decodeCursor(after); !ok {
			return 0, 0, invalidData("Pagination", "after", "cursor is not correct")
		}
	}
	return first, offset, nil
}

// pageObject is a page of total objects from offset to end.
func pageObject(page []object, offset, end, total int) object {
	return object{
		"data":       page,
		"totalCount": total,
		"pageInfo": object{
			"startCursor": encodeCursor(offset),
			"endCursor":   encodeCursor(end),
			"hasNextPage": end < total,
		},
	}
}

// parseFilters reads the filters as the Director does: a query on a path-query key is a SQL/JSON
// path whose values are extracted, on any other key a JSON value the label's value must contain;
// a query that is neither fails as the Director's SQL statement does.
func parseFilters(v any) ([]labelFilter, error) {
	var items []map[string]any
	switch x := v.(type) {
	case nil:
	case []any:
		for _, e := range x {
			m, _ := e.(map[string]any)
			items = append(items, m)
		}
	case []map[string]any: // a single filter given where a list is expected
		items = x
	}
	out := make([]labelFilter, 0, len(items))
	for _, m := range items {
		key, _ := m["key"].(string)
		f := labelFilter{key: key}
		q, ok := m["query"].(string)
		if !ok {
			out = append(out, f)
			continue
		}
		f.hasQuery = true
		if pathQueryKey(key) {
			for _, sub := range pathQueryValue.FindAllStringSubmatch(q, -1) {
				if sub[1] != "" {
					f.values = append(f.values, sub[1])
				} else {
					f.values = append(f.values, sub[2])
				}
			}
			if len(f.values) == 0 {
				return nil, sqlError() // an InternalError of the Director's own: answered without a reason
			}
		} else {
			dec := json.NewDecoder(strings.NewReader(q))
			dec.UseNumber()
			if err := dec.Decode(&f.value); err != nil || dec.More() {
				return nil, sqlError() // PostgreSQL: invalid input syntax for type json
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// matches tells whether labels satisfy every filter: the key exists and, with a query, the
// value holds one of the path query's values or contains the JSON value.
func matches(labels map[string]any, filters []labelFilter) bool {
	for _, f := range filters {
		v, ok := labels[f.key]
		if !ok {
			return false
		}
		if !f.hasQuery {
			continue
		}
		if f.values != nil {
			list, _ := v.([]any)
			if !slices.ContainsFunc(list, func(e any) bool { s, _ := e.(string); return slices.Contains(f.values, s) }) {
				return false
			}
			continue
		}
		if !jsonbContains(v, f.value, true) {
			return false
		}
	}
	return true
}

// jsonbContains is PostgreSQL's jsonb a @> b: objects contain objects key by key, arrays contain
// arrays element by element, and, at the top only, an array contains a scalar it holds.
func jsonbContains(a, b any, top bool) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return false
		}
		for k, bv := range y {
			av, has := x[k]
			if !has || !jsonbContains(av, bv, false) {
				return false
			}
		}
		return true
	case []any:
		if y, ok := b.([]any); ok {
			for _, be := range y {
				if !slices.ContainsFunc(x, func(ae any) bool { return jsonbContains(ae, be, false) }) {
					return false
				}
			}
			return true
		}
		if _, isObj := b.(map[string]any); top && !isObj {
			return slices.ContainsFunc(x, func(ae any) bool { return jsonScalarEqual(ae, b) })
		}
		return false
	default:
		return jsonScalarEqual(a, b)
	}
}

func jsonScalarEqual(a, b any) bool {
	if an, ok := a.(json.Number); ok {
		bn, ok := b.(json.Number)
		if !ok {
			return false
		}
		af, aerr := an.Float64()
		bf, berr := bn.Float64()
		return aerr == nil && berr == nil && af == bf
	}
	switch b.(type) {
	case map[string]any, []any:
		return false
	}
	return a == b
}

func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case int64:
		return int(x), true
	case int:
		return x, true
	case float64:
		return int(x), x == float64(int(x))
	case json.Number:
		n, err := x.Int64()
		return int(n), err == nil
	case string:
		n, err := strconv.Atoi(x)
		return n, err == nil
	}
	return 0, false
}

const cursorPrefix = "offset:"

func encodeCursor(offset int) string {
	return base64.StdEncoding.EncodeToString([]byte(cursorPrefix + strconv.Itoa(offset)))
}

func decodeCursor(c string) (int, bool) {
	b, err := base64.StdEncoding.DecodeString(c)
	if err != nil || !strings.HasPrefix(string(b), cursorPrefix) {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimPrefix(string(b), cursorPrefix))
	return n, err == nil && n >= 0
}
