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

// Host cluster request rates. client-go's defaults (5 per second, bursts of 10) are meant for
// a command line tool; one host cluster serves a whole fleet's runtimes here, and at 5 per
// second a dozen provisionings would queue behind each other. The API server's priority and
// fairness still protects it from this client.
const (
	QPS   = 50
	Burst = 100
)

// RESTConfig reads the kubeconfig and builds a client configuration from it, with the
// fleet's request rates (QPS, Burst).
func (s Source) RESTConfig() (*rest.Config, error) {
	b, err := s.Read()
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(b)
	if err != nil {
		return nil, fmt.Errorf("parsing kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = QPS, Burst
	return cfg, nil
}
