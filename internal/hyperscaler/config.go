package hyperscaler

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/gardener"
)

// Config selects and tunes the pool (APP_HYPERSCALER_ACCOUNT_POOL_*, read with prefix APP).
type Config struct {
	// List is the list pool: "<hyperscaler>:<secret>[,<secret>...];...".
	List string `envconfig:"HYPERSCALER_ACCOUNT_POOL" default:"aws:kyma-aws;azure:kyma-azure;gcp:kyma-gcp;openstack:kyma-openstack"`
	// Source is auto (the Gardener pool when the provisioner set has a gardener backend, else
	// the list), gardener or list.
	Source string `envconfig:"HYPERSCALER_ACCOUNT_POOL_SOURCE" default:"auto"`
	// Provisioner names the gardener entry of the provisioner set whose cluster and project hold
	// the bindings (default: the default entry when it is a gardener one, else the only one).
	Provisioner string `envconfig:"HYPERSCALER_ACCOUNT_POOL_PROVISIONER"`
	// BindingKind is SecretBinding or CredentialsBinding.
	BindingKind string `envconfig:"HYPERSCALER_ACCOUNT_POOL_BINDING_KIND" default:"SecretBinding"`
	// SharedPlans are the plans on shared accounts; EUAccessRegions the platform regions on the
	// EU access pool.
	SharedPlans     []string `envconfig:"HYPERSCALER_ACCOUNT_POOL_SHARED_PLANS" default:"trial"`
	EUAccessRegions []string `envconfig:"HYPERSCALER_ACCOUNT_POOL_EU_ACCESS_REGIONS" default:"cf-eu11,cf-ch20"`
}

// Sources of the pool.
const (
	SourceAuto     = "auto"
	SourceGardener = "gardener"
	SourceList     = "list"
)

// Rules are the configured request rules.
func (c Config) Rules() Rules {
	return Rules{SharedPlans: c.SharedPlans, EUAccessRegions: c.EUAccessRegions}
}

// Build makes the pool: the Gardener one on the cluster and project of the provisioner set's
// gardener backend (backends: the set as the provisioner reads it, APP_GARDENER_* applied), or
// the list. It says which in its log line.
func (c Config) Build(backends infrastructure.Config, log logrus.FieldLogger) (Pool, error) {
	if log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		log = l
	}
	src := strings.ToLower(strings.TrimSpace(c.Source))
	if src != SourceAuto && src != SourceGardener && src != SourceList {
		return nil, fmt.Errorf("APP_HYPERSCALER_ACCOUNT_POOL_SOURCE %q: want auto, gardener or list", c.Source)
	}
	if src != SourceList {
		name, spec, found, err := GardenerEntry(backends, c.Provisioner)
		switch {
		case err != nil:
			return nil, err
		case found:
			kind, err := ParseBindingKind(c.BindingKind)
			if err != nil {
				return nil, fmt.Errorf("APP_HYPERSCALER_ACCOUNT_POOL_BINDING_KIND: %w", err)
			}
			dyn, err := dynamicClient(spec)
			if err != nil {
				return nil, fmt.Errorf("hyperscaler account pool on provisioner %q: %w", name, err)
			}
			p, err := NewGardener(dyn, "garden-"+spec.Project, kind, log.WithField("component", "account_pool"))
			if err != nil {
				return nil, err
			}
			log.WithFields(logrus.Fields{"provisioner": name, "gardener_namespace": p.Namespace(), "binding_kind": kind}).
				Info("hyperscaler account pool: the Gardener project's bindings")
			return p, nil
		case src == SourceGardener:
			return nil, errors.New("APP_HYPERSCALER_ACCOUNT_POOL_SOURCE is gardener but the provisioner set has no gardener backend (APP_PROVISIONER_SET_JSON, APP_GARDENER_*)")
		}
	}
	p, err := ParsePool(c.List)
	if err != nil {
		return nil, fmt.Errorf("APP_HYPERSCALER_ACCOUNT_POOL: %w", err)
	}
	log.WithField("types", p.Types()).Info("hyperscaler account pool: the configured list (APP_HYPERSCALER_ACCOUNT_POOL)")
	return p, nil
}

// GardenerEntry finds the gardener backend of the provisioner set that holds the pool: the one
// named want, else the default entry when it is a gardener one, else the only gardener entry.
// found is false when the set has none (and want is empty).
func GardenerEntry(backends infrastructure.Config, want string) (name string, spec gardener.Spec, found bool, err error) {
	entries, def, err := infrastructure.LoadSet(backends)
	if err != nil {
		return "", gardener.Spec{}, false, fmt.Errorf("hyperscaler account pool: %w", err)
	}
	var garden []infrastructure.Entry
	for _, e := range entries {
		if e.Type == gardener.Type {
			garden = append(garden, e)
		}
	}
	pick := func(e infrastructure.Entry) (string, gardener.Spec, bool, error) {
		var s gardener.Spec
		if err := json.Unmarshal(e.Spec, &s); err != nil {
			return "", s, false, fmt.Errorf("hyperscaler account pool: provisioner set entry %q: %w", e.Name, err)
		}
		if err := s.Validate(); err != nil {
			return "", s, false, fmt.Errorf("hyperscaler account pool: provisioner set entry %q: %w", e.Name, err)
		}
		return e.Name, s, true, nil
	}
	if want != "" {
		for _, e := range garden {
			if e.Name == want {
				return pick(e)
			}
		}
		return "", gardener.Spec{}, false, fmt.Errorf("APP_HYPERSCALER_ACCOUNT_POOL_PROVISIONER %q: the provisioner set has no gardener entry of that name", want)
	}
	for _, e := range garden {
		if e.Name == def {
			return pick(e)
		}
	}
	switch len(garden) {
	case 0:
		return "", gardener.Spec{}, false, nil
	case 1:
		return pick(garden[0])
	}
	names := make([]string, len(garden))
	for i, e := range garden {
		names[i] = e.Name
	}
	sort.Strings(names)
	return "", gardener.Spec{}, false, fmt.Errorf("hyperscaler account pool: the provisioner set has several gardener entries (%s): name the pool's with APP_HYPERSCALER_ACCOUNT_POOL_PROVISIONER", strings.Join(names, ", "))
}

// dynamicClient connects to the cluster of the gardener spec's kubeconfig.
func dynamicClient(spec gardener.Spec) (dynamic.Interface, error) {
	raw := []byte(spec.Kubeconfig)
	if spec.KubeconfigPath != "" {
		b, err := os.ReadFile(spec.KubeconfigPath)
		if err != nil {
			return nil, fmt.Errorf("reading the Gardener kubeconfig: %w", err)
		}
		raw = b
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("parsing the Gardener kubeconfig: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the Gardener client: %w", err)
	}
	return dyn, nil
}
