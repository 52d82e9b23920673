package gqlschema

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"
)

// realSchemaFacts is testdata/real_schema_facts.json: the Compass Runtime Provisioner's schema
// at the commits it names.
type realSchemaFacts struct {
	Repository string `json:"repository"`
	Path       string `json:"path"`
	Versions   []struct {
		Name   string              `json:"name"`
		Commit string              `json:"commit"`
		Types  map[string]realType `json:"types"`
	} `json:"versions"`
}

type realType struct {
	Kind    string               `json:"kind"`
	Fields  map[string]realField `json:"fields"`
	Members []string             `json:"members"`
	Values  []string             `json:"values"`
}

type realField struct {
	Type string            `json:"type"`
	Args map[string]string `json:"args"`
}

// TestSchemaIsSupersetOfTheRealProvisioner checks that every document valid against the real
// provisioner's schema (either version) is valid against ours and means the same: every type
// with its kind, every field, argument, union member and enum value is there, and
//   - an output field has exactly the real type: nullability is part of a response's shape,
//     which GraphQL compares when fragments on a union's members select the same name;
//   - an argument or input field accepts whatever the real one accepts (the same named type
//     and list nesting, nullable wherever the real one is), and one of ours the real schema
//     lacks is optional, as clients of the real schema never send it.
func TestSchemaIsSupersetOfTheRealProvisioner(t *testing.T) {
	raw, err := os.ReadFile("testdata/real_schema_facts.json")
	require.NoError(t, err)
	var facts realSchemaFacts
	require.NoError(t, json.Unmarshal(raw, &facts))
	require.NotEmpty(t, facts.Versions)

	ours := NewExecutableSchema(Config{}).Schema()
	for _, v := range facts.Versions {
		t.Run(v.Name, func(t *testing.T) {
			require.NotEmpty(t, v.Types)
			problems := supersetProblems(ours, v.Types)
			if len(problems) > 0 {
				t.Errorf("our schema is no superset of %s %s@%s (%d problems):\n  %s",
					facts.Repository, facts.Path, v.Commit, len(problems), strings.Join(problems, "\n  "))
			}
		})
	}
}

// TestSupersetCheckCatches makes sure the check above can fail: it is run against a schema
// missing or loosening what the facts require.
func TestSupersetCheckCatches(t *testing.T) {
	ours := NewExecutableSchema(Config{}).Schema()
	cases := map[string]map[string]realType{
		"missing type":          {"NoSuchType": {Kind: "OBJECT"}},
		"other kind":            {"ProviderSpecificConfig": {Kind: "OBJECT"}},
		"missing field":         {"GardenerConfig": {Kind: "OBJECT", Fields: map[string]realField{"noSuchField": {Type: "String"}}}},
		"output nullability":    {"OIDCConfig": {Kind: "OBJECT", Fields: map[string]realField{"clientID": {Type: "String"}}}},
		"input stricter":        {"AzureProviderConfigInput": {Kind: "INPUT_OBJECT", Fields: map[string]realField{"zones": {Type: "[String]"}}}},
		"ours requires more":    {"AWSZoneInput": {Kind: "INPUT_OBJECT", Fields: map[string]realField{"name": {Type: "String!"}}}},
		"missing union member":  {"ProviderSpecificConfig": {Kind: "UNION", Members: []string{"NoSuchConfig"}}},
		"missing enum value":    {"OperationType": {Kind: "ENUM", Values: []string{"NoSuchOperation"}}},
		"argument type differs": {"Query": {Kind: "OBJECT", Fields: map[string]realField{"runtimeStatus": {Type: "RuntimeStatus", Args: map[string]string{"id": "Int!"}}}}},
	}
	for name, types := range cases {
		t.Run(name, func(t *testing.T) {
			require.NotEmpty(t, supersetProblems(ours, types))
		})
	}
}

func supersetProblems(ours *ast.Schema, real map[string]realType) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for _, name := range sortedKeys(real) {
		rt := real[name]
		def := ours.Types[name]
		if def == nil {
			add("type %s (%s) is missing", name, rt.Kind)
			continue
		}
		if string(def.Kind) != rt.Kind {
			add("type %s is %s, the real one %s", name, def.Kind, rt.Kind)
			continue
		}
		switch def.Kind {
		case ast.Object:
			for _, fname := range sortedKeys(rt.Fields) {
				rf := rt.Fields[fname]
				f := def.Fields.ForName(fname)
				if f == nil {
					add("field %s.%s: %s is missing", name, fname, rf.Type)
					continue
				}
				if f.Type.String() != rf.Type {
					add("field %s.%s is %s, the real one %s", name, fname, f.Type, rf.Type)
				}
				for _, aname := range sortedKeys(rf.Args) {
					a := f.Arguments.ForName(aname)
					if a == nil {
						add("argument %s.%s(%s) is missing", name, fname, aname)
						continue
					}
					if !acceptsAll(a.Type, parseTypeRef(rf.Args[aname])) {
						add("argument %s.%s(%s) is %s, which does not accept all of the real %s", name, fname, aname, a.Type, rf.Args[aname])
					}
				}
				for _, a := range f.Arguments {
					if _, ok := rf.Args[a.Name]; !ok && a.Type.NonNull && a.DefaultValue == nil {
						add("argument %s.%s(%s) is required but the real schema has no such argument", name, fname, a.Name)
					}
				}
			}
		case ast.InputObject:
			for _, fname := range sortedKeys(rt.Fields) {
				rf := rt.Fields[fname]
				f := def.Fields.ForName(fname)
				if f == nil {
					add("input field %s.%s: %s is missing", name, fname, rf.Type)
					continue
				}
				if !acceptsAll(f.Type, parseTypeRef(rf.Type)) {
					add("input field %s.%s is %s, which does not accept all of the real %s", name, fname, f.Type, rf.Type)
				}
			}
			for _, f := range def.Fields {
				if _, ok := rt.Fields[f.Name]; !ok && f.Type.NonNull && f.DefaultValue == nil {
					add("input field %s.%s is required but the real schema has no such field", name, f.Name)
				}
			}
		case ast.Union:
			for _, m := range rt.Members {
				if !contains(def.Types, m) {
					add("union %s lacks member %s", name, m)
				}
			}
		case ast.Enum:
			for _, v := range rt.Values {
				if def.EnumValues.ForName(v) == nil {
					add("enum %s lacks value %s", name, v)
				}
			}
		}
	}
	return problems
}

// acceptsAll reports whether every value (or variable) valid for the real input type is valid
// for ours.
func acceptsAll(ours, real *ast.Type) bool {
	if real.NonNull == false && ours.NonNull {
		return false
	}
	if (ours.Elem == nil) != (real.Elem == nil) {
		return false
	}
	if ours.Elem != nil {
		return acceptsAll(ours.Elem, real.Elem)
	}
	return ours.NamedType == real.NamedType
}

// parseTypeRef parses a GraphQL type reference such as "[AWSZoneInput]!".
func parseTypeRef(s string) *ast.Type {
	t := &ast.Type{}
	if strings.HasSuffix(s, "!") {
		t.NonNull = true
		s = strings.TrimSuffix(s, "!")
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		t.Elem = parseTypeRef(s[1 : len(s)-1])
		return t
	}
	t.NamedType = s
	return t
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
