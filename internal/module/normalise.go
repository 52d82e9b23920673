package module

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Normalise gives the bytes a signature covers (OCM jsonNormalisation/v1): the descriptor as JSON
// with every object turned into a list of single-key objects sorted by key, null values dropped,
// and without what may change when a component moves between repositories or is signed again:
// the signatures, the repository contexts, the access of resources and sources, and labels not
// marked for signing. The resources' digests stay in, so the signature covers every layer's content.
func Normalise(cd *ComponentDescriptor) ([]byte, error) {
	raw, err := json.Marshal(cd)
	if err != nil {
		return nil, fmt.Errorf("normalise descriptor: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("normalise descriptor: %w", err)
	}
	delete(doc, "signatures")
	if comp, ok := doc["component"].(map[string]any); ok {
		delete(comp, "repositoryContexts")
		comp["labels"] = signingLabels(comp["labels"])
		for _, key := range []string{"resources", "sources"} {
			items, _ := comp[key].([]any)
			for _, it := range items {
				if m, ok := it.(map[string]any); ok {
					delete(m, "access")
					m["labels"] = signingLabels(m["labels"])
				}
			}
		}
		refs, _ := comp["componentReferences"].([]any)
		for _, it := range refs {
			if m, ok := it.(map[string]any); ok {
				m["labels"] = signingLabels(m["labels"])
			}
		}
	}
	return json.Marshal(normaliseValue(doc))
}

// signingLabels keeps the labels marked signing: true (nil when none, so the key is dropped).
func signingLabels(v any) any {
	items, _ := v.([]any)
	var kept []any
	for _, it := range items {
		if m, ok := it.(map[string]any); ok && m["signing"] == true {
			kept = append(kept, m)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	return kept
}

func normaliseValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k, val := range t {
			if val != nil {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		out := make([]any, 0, len(keys))
		for _, k := range keys {
			out = append(out, map[string]any{k: normaliseValue(t[k])})
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = normaliseValue(e)
		}
		return out
	default:
		return v
	}
}
