// Package seed004 gives tests the text of seed 004 (the Rill provisioner's README, kept
// verbatim in seed_004.txt): its provisioner set example and its four templates, exactly as
// a user would copy them.
package seed004

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"
)

//go:embed seed_004.txt
var text string

// Text is the whole seed.
func Text() string { return text }

// SetJSON is the seed's example provisioner set, // comments included.
func SetJSON() (string, error) {
	i := strings.Index(text, "## Configuration")
	if i < 0 {
		return "", fmt.Errorf("seed 004: no Configuration section")
	}
	return block(text[i:], "the Configuration section")
}

// Template is the seed's template of field ("statefulset", "service", "grpc_ingress",
// "http_ingress").
func Template(field string) (string, error) {
	i := strings.Index(text, "### "+field+".yaml\n")
	if i < 0 {
		return "", fmt.Errorf("seed 004: no template %s.yaml", field)
	}
	return block(text[i:], field+".yaml")
}

var fence = regexp.MustCompile("(?s)```\n(.*?)```")

func block(s, what string) (string, error) {
	m := fence.FindStringSubmatch(s)
	if m == nil {
		return "", fmt.Errorf("seed 004: no code block in %s", what)
	}
	return m[1], nil
}
