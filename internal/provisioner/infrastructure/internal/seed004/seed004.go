// Package seed004 gives tests the text of seed 004 (the Rill provisioner's README, kept
// verbatim in seed_004.txt): its provisioner set example and its four templates, exactly as
// a user would copy them.
package seed004

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
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

// WriteExample writes into dir what seed 004's kubernetes example points at, relative to the
// working directory: kubeconfig.yaml (kubeconfig) and templates/<field>.yaml (the seed's four
// templates, as written).
func WriteExample(dir string, kubeconfig []byte) error {
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig.yaml"), kubeconfig, 0o600); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "templates"), 0o700); err != nil {
		return err
	}
	for _, f := range []string{"statefulset", "service", "grpc_ingress", "http_ingress"} {
		text, err := Template(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "templates", f+".yaml"), []byte(text), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// UnreachableKubeconfig is a well-formed kubeconfig of a server nobody listens on: backends
// accept it, and nothing connects before a call.
const UnreachableKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
users: [{name: u, user: {token: t}}]
`
