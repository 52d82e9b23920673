// Package directorschema holds what is known about the real Compass Director's GraphQL API (the
// schema subset in schema.graphql and the facts in facts.json, each citing its source): the
// contract tests of the Director's clients validate the documents they send against it, and the
// sandbox's Director stand-in serves it.
package directorschema

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"
)

// SDL is the schema subset.
//
//go:embed schema.graphql
var SDL string

//go:embed facts.json
var factsJSON []byte

// Facts are the facts of facts.json that code checks against.
type Facts struct {
	RuntimeName struct {
		Pattern  string `json:"pattern"`
		MaxRunes int    `json:"maxRunes"`
	} `json:"runtimeName"`
	DescriptionMaxRunes int `json:"descriptionMaxRunes"`
	LabelKey            struct {
		Pattern  string `json:"pattern"`
		MaxRunes int    `json:"maxRunes"`
	} `json:"labelKey"`
	RefusedLabels struct {
		Keys    []string `json:"keys"`
		Problem string   `json:"problem"`
	} `json:"refusedLabels"`
}

// LoadFacts decodes facts.json; it is a constant of the package, so failing is a programming error.
func LoadFacts() Facts {
	var f Facts
	if err := json.Unmarshal(factsJSON, &f); err != nil {
		panic(fmt.Sprintf("directorschema: facts.json: %v", err))
	}
	regexp.MustCompile(f.LabelKey.Pattern)
	regexp.MustCompile(f.RuntimeName.Pattern)
	return f
}

// Load parses the schema.
func Load() (*ast.Schema, error) {
	s, err := gqlparser.LoadSchema(&ast.Source{Name: "director.graphql", Input: SDL})
	if err != nil {
		return nil, fmt.Errorf("parsing the Director schema: %w", err)
	}
	return s, nil
}

// Validate checks one request as the Director would before running it: the document parses and
// is valid against the schema, and the variables (as decoded from the request's JSON) coerce to
// the operation's variable types.
func Validate(s *ast.Schema, query string, vars map[string]any) error {
	doc, perr := parser.ParseQuery(&ast.Source{Input: query})
	if perr != nil {
		return fmt.Errorf("parsing the document: %w", perr)
	}
	if errs := validator.ValidateWithRules(s, doc, nil); len(errs) > 0 {
		return fmt.Errorf("validating the document: %w", errs)
	}
	if len(doc.Operations) != 1 {
		return errors.New("the document must hold exactly one operation")
	}
	if _, err := validator.VariableValues(s, doc.Operations[0], vars); err != nil {
		return fmt.Errorf("coercing the variables: %w", err)
	}
	return nil
}
