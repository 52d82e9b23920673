// Package kubeconfig reads the kubeconfig a backend's spec points at (inline or a file) and
// turns it into a client configuration.
package kubeconfig

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Source is a kubeconfig given inline or as a file path (exactly one of them).
type Source struct {
	Inline string
	Path   string
}

// Validate checks that exactly one of Inline and Path is set; field is the spec field prefix
// used in messages ("spec", "spec.runtimes[2]").
func (s Source) Validate(field string) error {
	switch {
	case s.Inline != "" && s.Path != "":
		return fmt.Errorf("%s: set either kubeconfig or kubeconfig_path, not both", field)
	case s.Inline == "" && s.Path == "":
		return fmt.Errorf("%s: kubeconfig or kubeconfig_path is required", field)
	}
	return nil
}

// Read returns the kubeconfig; a file is read on every call, so a rotated file is picked up.
func (s Source) Read() ([]byte, error) {
	if s.Inline != "" {
		return []byte(s.Inline), nil
	}
	if s.Path == "" {
		return nil, errors.New("no kubeconfig configured")
	}
	b, err := os.ReadFile(s.Path)
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig: %w", err)
	}
	return b, nil
}

// RESTConfig reads the kubeconfig and builds a client configuration from it.
func (s Source) RESTConfig() (*rest.Config, error) {
	b, err := s.Read()
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(b)
	if err != nil {
		return nil, fmt.Errorf("parsing kubeconfig: %w", err)
	}
	return cfg, nil
}
