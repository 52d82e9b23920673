package module

import (
	"bytes"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// ValidateDefaultCR parses a module's default custom resource (one object with apiVersion, kind
// and metadata.name) and, when the module's manifest ships the CustomResourceDefinition of its
// kind, checks it against that CRD the way the API server would: the version is served, and the
// object fits the version's schema (types, required fields, enums, patterns, bounds, and no
// fields the schema does not know, as strict field validation reports them).
func ValidateDefaultCR(cr, manifest []byte) error {
	var obj map[string]any
	if err := yaml.Unmarshal(cr, &obj); err != nil {
		return invalid("default CR: not YAML: %v", err)
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	if apiVersion == "" || kind == "" || name == "" {
		return invalid("default CR: apiVersion, kind and metadata.name are required")
	}
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group, version = "", apiVersion
	}
	docs, err := yamlDocuments(manifest)
	if err != nil {
		return invalid("manifest: %v", err)
	}
	for _, d := range docs {
		if d["kind"] != "CustomResourceDefinition" {
			continue
		}
		spec, _ := d["spec"].(map[string]any)
		names, _ := spec["names"].(map[string]any)
		if spec["group"] != group || names["kind"] != kind {
			continue
		}
		versions, _ := spec["versions"].([]any)
		var served []string
		for _, v := range versions {
			vm, _ := v.(map[string]any)
			if vm["served"] != true {
				continue
			}
			served = append(served, fmt.Sprint(vm["name"]))
			if vm["name"] != version {
				continue
			}
			schema, _ := vm["schema"].(map[string]any)
			openAPI, _ := schema["openAPIV3Schema"].(map[string]any)
			if openAPI == nil {
				return nil
			}
			body := map[string]any{}
			for k, v := range obj {
				if k != "apiVersion" && k != "kind" && k != "metadata" {
					body[k] = v
				}
			}
			props, _ := openAPI["properties"].(map[string]any)
			top := map[string]any{"type": "object", "properties": withoutKeys(props, "apiVersion", "kind", "metadata"),
				"required": openAPI["required"], "x-kubernetes-preserve-unknown-fields": openAPI["x-kubernetes-preserve-unknown-fields"]}
			if errs := checkSchema("", body, top); len(errs) > 0 {
				return invalid("default CR %s %s does not fit the CRD %s shipped in the manifest: %s", kind, name, d["metadata"].(map[string]any)["name"], strings.Join(errs, "; "))
			}
			return nil
		}
		return invalid("default CR: version %s of %s is not served by the CRD in the manifest (served: %s)", version, kind, strings.Join(served, ", "))
	}
	return nil
}

func withoutKeys(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// yamlDocuments splits a multi-document YAML stream into objects (empty documents skipped).
func yamlDocuments(data []byte) ([]map[string]any, error) {
	var out []map[string]any
	for _, part := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if len(bytes.TrimSpace([]byte(part))) == 0 {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(part), &m); err != nil {
			return nil, err
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out, nil
}

// checkSchema checks v against a structural OpenAPI v3 schema, returning every violation.
func checkSchema(path string, v any, s map[string]any) []string {
	at := path
	if at == "" {
		at = "."
	}
	if v == nil {
		if s["nullable"] == true {
			return nil
		}
		return []string{at + ": null"}
	}
	if enum, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if fmt.Sprint(e) == fmt.Sprint(v) {
				found = true
			}
		}
		if !found {
			return []string{fmt.Sprintf("%s: %v is not one of %v", at, v, enum)}
		}
	}
	if s["x-kubernetes-int-or-string"] == true {
		switch v.(type) {
		case string, float64:
			return nil
		}
		return []string{at + ": want an integer or a string"}
	}
	var errs []string
	switch s["type"] {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			return []string{at + ": want an object"}
		}
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		for _, r := range req {
			if _, ok := m[fmt.Sprint(r)]; !ok {
				errs = append(errs, fmt.Sprintf("%s.%s: required", path, r))
			}
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if ps, ok := props[k].(map[string]any); ok {
				errs = append(errs, checkSchema(path+"."+k, m[k], ps)...)
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case map[string]any:
				errs = append(errs, checkSchema(path+"."+k, m[k], ap)...)
				continue
			case bool:
				if ap {
					continue
				}
			}
			if s["x-kubernetes-preserve-unknown-fields"] != true {
				errs = append(errs, fmt.Sprintf("%s.%s: unknown field", path, k))
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return []string{at + ": want an array"}
		}
		if n, ok := s["minItems"].(float64); ok && float64(len(a)) < n {
			errs = append(errs, fmt.Sprintf("%s: at least %v items", at, n))
		}
		if n, ok := s["maxItems"].(float64); ok && float64(len(a)) > n {
			errs = append(errs, fmt.Sprintf("%s: at most %v items", at, n))
		}
		if items, ok := s["items"].(map[string]any); ok {
			for i, e := range a {
				errs = append(errs, checkSchema(fmt.Sprintf("%s[%d]", path, i), e, items)...)
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			return []string{at + ": want a string"}
		}
		if n, ok := s["minLength"].(float64); ok && float64(len([]rune(str))) < n {
			errs = append(errs, fmt.Sprintf("%s: at least %v characters", at, n))
		}
		if n, ok := s["maxLength"].(float64); ok && float64(len([]rune(str))) > n {
			errs = append(errs, fmt.Sprintf("%s: at most %v characters", at, n))
		}
		if p, ok := s["pattern"].(string); ok {
			if re, err := regexp.Compile(p); err == nil && !re.MatchString(str) {
				errs = append(errs, fmt.Sprintf("%s: %q does not match %s", at, str, p))
			}
		}
	case "integer", "number":
		f, ok := v.(float64)
		if !ok || (s["type"] == "integer" && f != math.Trunc(f)) {
			return []string{fmt.Sprintf("%s: want an %s", at, s["type"])}
		}
		if n, ok := s["minimum"].(float64); ok && f < n {
			errs = append(errs, fmt.Sprintf("%s: %v is below the minimum %v", at, f, n))
		}
		if n, ok := s["maximum"].(float64); ok && f > n {
			errs = append(errs, fmt.Sprintf("%s: %v is above the maximum %v", at, f, n))
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return []string{at + ": want a boolean"}
		}
	}
	return errs
}
