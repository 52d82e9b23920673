package module

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Normalise gives the bytes a signature covers: OCM's jsonNormalisation/v1 of a component
// descriptor v2, rule for rule as OCM applies them (api/ocm/compdesc/versions/v2/signing.go and
// api/tech/signing of open-component-model/ocm; the vectors in testdata/ocm-normalisation.json
// are OCM's own). Every object becomes a list of single-key objects sorted by key; arrays keep
// their order. In: meta; component name, version, provider (a provider with labels as an object
// with its signed labels), creationTime, componentReferences and resources. Out: signatures,
// nestedDigests, repositoryContexts, sources, every access, resources' srcRefs, and labels
// without signing: true (of a kept label only name, version, value and signing). Resources and
// references always carry extraIdentity (null when empty); a resource whose access type is
// none loses its digest. Only fields of OCM's v2 schema count: what OCM would not read does
// not change the digest. As OCM does for v1, of resources with the same name and extra
// identity every one but the last gets its version into the extra identity.
func Normalise(cd *ComponentDescriptor) ([]byte, error) {
	if cd.Meta.SchemaVersion != SchemaVersionV2 {
		return nil, fmt.Errorf("normalise: %s supports component descriptor %s, not %q", NormalisationJSONV1, SchemaVersionV2, cd.Meta.SchemaVersion)
	}
	c := cd.Component
	comp := map[string]any{
		"name":     c.Name,
		"version":  c.Version,
		"provider": normProvider(c.Provider),
	}
	if labels := normLabels(c.Labels); labels != nil {
		comp["labels"] = labels
	}
	if c.CreationTime != "" {
		t, err := time.Parse(time.RFC3339, c.CreationTime)
		if err != nil {
			return nil, fmt.Errorf("normalise: creationTime %q: %w", c.CreationTime, err)
		}
		// OCM keeps timestamps in UTC, rounded to seconds.
		comp["creationTime"] = t.UTC().Round(time.Second).Format(time.RFC3339)
	}
	refs := []any{}
	for _, r := range c.ComponentReferences {
		m := map[string]any{
			"name": r.Name, "version": r.Version, "componentName": r.ComponentName,
			"extraIdentity": normIdentity(r.ExtraIdentity),
		}
		if labels := normLabels(r.Labels); labels != nil {
			m["labels"] = labels
		}
		if r.Digest != nil {
			m["digest"] = normDigest(r.Digest)
		}
		refs = append(refs, m)
	}
	comp["componentReferences"] = refs
	ids := legacyExtraIdentities(c.Resources)
	res := []any{}
	for i, r := range c.Resources {
		m := map[string]any{
			"name": r.Name, "version": r.Version, "type": r.Type,
			"extraIdentity": normIdentity(ids[i]),
		}
		if r.Relation != "" {
			m["relation"] = r.Relation
		}
		if labels := normLabels(r.Labels); labels != nil {
			m["labels"] = labels
		}
		if r.Digest != nil && r.Access.Type != "none" && r.Access.Type != "None" {
			m["digest"] = normDigest(r.Digest)
		}
		res = append(res, m)
	}
	comp["resources"] = res
	doc := map[string]any{
		"meta":      map[string]any{"schemaVersion": cd.Meta.SchemaVersion},
		"component": comp,
	}
	// Through JSON and back, so values (label values above all) are what OCM sees: numbers as
	// float64, objects as maps.
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("normalise descriptor: %w", err)
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return nil, fmt.Errorf("normalise descriptor: %w", err)
	}
	out, err := json.Marshal(entries(generic))
	if err != nil {
		return nil, fmt.Errorf("normalise descriptor: %w", err)
	}
	return out, nil
}

// normLabels keeps the labels with signing: true, each with only name, version, value and
// signing; nil when none is kept (the field is then left out).
func normLabels(labels []Label) []any {
	var kept []any
	for _, l := range labels {
		if !l.Signing {
			continue
		}
		m := map[string]any{"name": l.Name, "value": l.Value, "signing": true}
		if l.Version != "" {
			m["version"] = l.Version
		}
		kept = append(kept, m)
	}
	return kept
}

// normProvider: a provider with labels is written by OCM as the JSON of the provider object;
// it is signed as that object with its signed labels.
func normProvider(p string) any {
	if !strings.HasPrefix(strings.TrimSpace(p), "{") {
		return p
	}
	var obj struct {
		Name   string  `json:"name"`
		Labels []Label `json:"labels"`
	}
	if err := json.Unmarshal([]byte(p), &obj); err != nil {
		return p
	}
	if len(obj.Labels) == 0 {
		return obj.Name
	}
	m := map[string]any{"name": obj.Name}
	if labels := normLabels(obj.Labels); labels != nil {
		m["labels"] = labels
	}
	return m
}

func normIdentity(id map[string]string) any {
	if len(id) == 0 {
		return nil
	}
	m := map[string]any{}
	for k, v := range id {
		m[k] = v
	}
	return m
}

func normDigest(d *DigestSpec) map[string]any {
	return map[string]any{"hashAlgorithm": d.HashAlgorithm, "normalisationAlgorithm": d.NormalisationAlgorithm, "value": d.Value}
}

// legacyExtraIdentities are the resources' extra identities as OCM's jsonNormalisation/v1 sees
// them: a resource whose name and extra identity equal another's (compared in order, after the
// earlier ones got theirs) gets its version added.
func legacyExtraIdentities(res []Resource) []map[string]string {
	ids := make([]map[string]string, len(res))
	for i, r := range res {
		ids[i] = map[string]string{}
		for k, v := range r.ExtraIdentity {
			ids[i][k] = v
		}
	}
	for i := range res {
		for j := range res {
			if i == j || res[i].Name != res[j].Name || !sameIdentity(ids[i], ids[j]) {
				continue
			}
			ids[i]["version"] = res[i].Version
			break
		}
	}
	return ids
}

func sameIdentity(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			return false
		}
	}
	return true
}

// entries turns every object into a list of single-key objects sorted by key (null values
// kept, as OCM keeps them).
func entries(v any) any {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make([]any, 0, len(keys))
		for _, k := range keys {
			out = append(out, map[string]any{k: entries(t[k])})
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = entries(e)
		}
		return out
	default:
		return v
	}
}

// Normalisation algorithms OCM signs with besides jsonNormalisation/v1.
const (
	NormalisationJSONV2 = "jsonNormalisation/v2"
	NormalisationJSONV3 = "jsonNormalisation/v3"
)

// NormaliseWith normalises with the named algorithm: jsonNormalisation/v1 (what this CLI and the
// real Kyma CLI sign with), or jsonNormalisation/v2 and /v3 (what current OCM signs with), so
// signatures OCM makes verify here. v2 and v3 (api/ocm/compdesc/normalizations/jsonv2, jsonv3)
// normalise OCM's schema-independent form as canonical JSON: meta, signatures, nestedDigests,
// repository contexts and every access left out, labels without signing: true left out (except
// on component references, which OCM's rules do not reach), a resource with access none without
// its digest; the provider as an object; sources in. v2 also gives duplicate resources their
// version as extra identity, as v1 does; v3 does not.
func NormaliseWith(cd *ComponentDescriptor, algorithm string) ([]byte, error) {
	switch algorithm {
	case NormalisationJSONV1:
		return Normalise(cd)
	case NormalisationJSONV2, NormalisationJSONV3:
	default:
		return nil, fmt.Errorf("normalise: algorithm %q not supported (want %s, %s or %s)", algorithm, NormalisationJSONV1, NormalisationJSONV2, NormalisationJSONV3)
	}
	c := cd.Component
	comp := map[string]any{"name": c.Name, "version": c.Version}
	prov := map[string]any{"name": c.Provider}
	if p, ok := normProvider(c.Provider).(map[string]any); ok {
		prov = p
	} else if s, ok := normProvider(c.Provider).(string); ok {
		prov["name"] = s
	}
	comp["provider"] = prov
	if labels := normLabels(c.Labels); labels != nil {
		comp["labels"] = labels
	}
	if c.CreationTime != "" {
		t, err := time.Parse(time.RFC3339, c.CreationTime)
		if err != nil {
			return nil, fmt.Errorf("normalise: creationTime %q: %w", c.CreationTime, err)
		}
		comp["creationTime"] = t.UTC().Round(time.Second).Format(time.RFC3339)
	}
	sources := []any{}
	for _, s := range c.Sources {
		m := map[string]any{"name": s.Name, "version": s.Version, "type": s.Type}
		if id := normIdentity(s.ExtraIdentity); id != nil {
			m["extraIdentity"] = id
		}
		if labels := normLabels(s.Labels); labels != nil {
			m["labels"] = labels
		}
		sources = append(sources, m)
	}
	comp["sources"] = sources
	refs := []any{}
	for _, r := range c.ComponentReferences {
		m := map[string]any{"name": r.Name, "version": r.Version, "componentName": r.ComponentName}
		if id := normIdentity(r.ExtraIdentity); id != nil {
			m["extraIdentity"] = id
		}
		if len(r.Labels) > 0 {
			var all []any
			for _, l := range r.Labels {
				lm := map[string]any{"name": l.Name, "value": l.Value}
				if l.Version != "" {
					lm["version"] = l.Version
				}
				if l.Signing {
					lm["signing"] = true
				}
				if l.Merge != nil {
					lm["merge"] = l.Merge
				}
				all = append(all, lm)
			}
			m["labels"] = all
		}
		if r.Digest != nil {
			m["digest"] = normDigest(r.Digest)
		}
		refs = append(refs, m)
	}
	comp["componentReferences"] = refs
	ids := make([]map[string]string, len(c.Resources))
	if algorithm == NormalisationJSONV2 {
		ids = legacyExtraIdentities(c.Resources)
	} else {
		for i, r := range c.Resources {
			ids[i] = r.ExtraIdentity
		}
	}
	res := []any{}
	for i, r := range c.Resources {
		m := map[string]any{"name": r.Name, "version": r.Version, "type": r.Type}
		if id := normIdentity(ids[i]); id != nil {
			m["extraIdentity"] = id
		}
		if r.Relation != "" {
			m["relation"] = r.Relation
		}
		if labels := normLabels(r.Labels); labels != nil {
			m["labels"] = labels
		}
		if r.Digest != nil && r.Access.Type != "none" && r.Access.Type != "None" {
			m["digest"] = normDigest(r.Digest)
		}
		res = append(res, m)
	}
	comp["resources"] = res
	return canonicalJSON(map[string]any{"component": comp})
}

// canonicalJSON encodes v as RFC 8785 (JCS) canonical JSON, as OCM's jcs normalisation does:
// sorted keys, no insignificant space, no HTML escaping. (Keys here are ASCII, so Go's byte
// order is JCS's UTF-16 order; numbers are formatted as ECMAScript does for the values OCM
// descriptors hold.)
func canonicalJSON(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("normalise descriptor: %w", err)
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return nil, fmt.Errorf("normalise descriptor: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(generic); err != nil {
		return nil, fmt.Errorf("normalise descriptor: %w", err)
	}
	in := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	// Go escapes U+2028 and U+2029 even without HTML escaping; JCS writes them as they are.
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); i++ {
		if in[i] != '\\' || i+1 >= len(in) {
			out = append(out, in[i])
			continue
		}
		if esc := string(in[i:min(i+6, len(in))]); esc == `\u2028` || esc == `\u2029` {
			out = append(out, []byte(map[string]string{`\u2028`: "\u2028", `\u2029`: "\u2029"}[esc])...)
			i += 5
			continue
		}
		out = append(out, in[i], in[i+1])
		i++
	}
	return out, nil
}
