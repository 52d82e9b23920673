package runtimeclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/module/modulespec"
	"github.com/kyma-project/kyma-environment-broker/internal/modulemanager"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// DefaultModuleReconcileTimeout bounds one installation pass of a runtime's modules.
const DefaultModuleReconcileTimeout = 30 * time.Second

// Modules is how the provisioner installs the Kyma modules a runtime requests. The catalog is
// the control plane's ModuleReleaseMetas and ModuleTemplates (what kyma alpha template writes);
// ApplyKyma copies those of the requested modules into the runtime's Kyma namespace, and each
// KymaState call runs one bounded pass of the module manager (internal/modulemanager) against
// the runtime's Kyma resource, as lifecycle-manager does from its control plane: the
// Wait_For_Installation step's retries are the manager's requeues, so nothing runs in the
// provisioner between attempts and a restarted provisioner simply carries on.
type Modules struct {
	// Catalog holds ModuleReleaseMeta and ModuleTemplate objects (namespaces are ignored).
	Catalog []*unstructured.Unstructured
	// Manager configures the passes: public keys, plain-HTTP registries, CA file.
	Manager modulemanager.Config
	// ReconcileTimeout bounds one pass [DefaultModuleReconcileTimeout].
	ReconcileTimeout time.Duration
}

// ModuleSettings say where the provisioner's module catalog and its trust come from (the
// APP_MODULE_* variables).
type ModuleSettings struct {
	// CatalogDir holds the catalog's YAML files; "" for none (modules are only recorded).
	CatalogDir string
	// PublicKeysFile has the PEM RSA public keys modules must be signed with.
	PublicKeysFile string
	// PlainHTTPRegistries are registry hosts reached over plain HTTP.
	PlainHTTPRegistries []string
	// RegistryCredentialsFile is a docker config JSON (auths by registry host, as docker login
	// or a kubernetes.io/dockerconfigjson Secret has them) to pull modules with; "" for none.
	RegistryCredentialsFile string
}

// LoadModules reads the catalog from the YAML files (*.yaml, *.yml, multi-document) of the
// catalog directory, the public keys and the registry credentials; nil without a catalog.
func LoadModules(s ModuleSettings, log logrus.FieldLogger) (*Modules, error) {
	dir := s.CatalogDir
	if dir == "" {
		return nil, nil
	}
	if s.PublicKeysFile == "" {
		return nil, errors.New("a module catalog needs public keys: modules are only installed when their signature verifies")
	}
	pemData, err := os.ReadFile(s.PublicKeysFile)
	if err != nil {
		return nil, fmt.Errorf("reading the modules' public keys: %w", err)
	}
	keys, err := modulemanager.ParsePublicKeys(pemData)
	if err != nil {
		return nil, fmt.Errorf("modules' public keys %s: %w", s.PublicKeysFile, err)
	}
	m := &Modules{Manager: modulemanager.Config{PublicKeys: keys, PlainHTTPRegistries: s.PlainHTTPRegistries, Log: log}}
	if s.RegistryCredentialsFile != "" {
		raw, err := os.ReadFile(s.RegistryCredentialsFile)
		if err != nil {
			return nil, fmt.Errorf("reading the module registries' credentials: %w", err)
		}
		// Checked now, so a broken file stops the start instead of every installation.
		if _, _, err := modulemanager.DockerConfigCredentials(raw, ""); err != nil {
			return nil, fmt.Errorf("module registries' credentials %s: %w", s.RegistryCredentialsFile, err)
		}
		m.Manager.DockerConfig = raw
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the module catalog: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() || !(strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
			continue
		}
		objs, err := readCatalogFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		m.Catalog = append(m.Catalog, objs...)
	}
	return m, nil
}

func readCatalogFile(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the module catalog: %w", err)
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := map[string]any{}
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("module catalog %s: %w", path, err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		switch u.GetKind() {
		case "ModuleTemplate", "ModuleReleaseMeta":
		default:
			return nil, fmt.Errorf("module catalog %s: %s %q is neither a ModuleTemplate nor a ModuleReleaseMeta", path, u.GetKind(), u.GetName())
		}
		if moduleNameOf(u) == "" {
			return nil, fmt.Errorf("module catalog %s: %s %q has no spec.moduleName", path, u.GetKind(), u.GetName())
		}
		out = append(out, u)
	}
}

func moduleNameOf(u *unstructured.Unstructured) string {
	n, _, _ := unstructured.NestedString(u.Object, "spec", "moduleName")
	return n
}

// ErrUnknownModule: a runtime requests a module the catalog does not have (asking again does
// not help).
var ErrUnknownModule = errors.New("the module catalog has no template of the module")

// objectsFor are the catalog objects of the requested modules, put into the Kyma namespace ns;
// a requested module the catalog lacks is an error naming it (ErrUnknownModule).
func (m *Modules) objectsFor(mods []modulespec.ModuleSpec, ns string) ([]*unstructured.Unstructured, error) {
	want := map[string]bool{}
	for _, s := range mods {
		want[s.Name] = true
	}
	found := map[string]bool{}
	var out []*unstructured.Unstructured
	for _, o := range m.Catalog {
		n := moduleNameOf(o)
		if !want[n] {
			continue
		}
		found[n] = true
		c := o.DeepCopy()
		c.SetNamespace(ns)
		labels := c.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[catalogCopyLabel] = fieldManager
		c.SetLabels(labels)
		c.SetResourceVersion("")
		c.SetUID("")
		out = append(out, c)
	}
	var missing []string
	for n := range want {
		if !found[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("%w: %s", ErrUnknownModule, strings.Join(missing, ", "))
	}
	return out, nil
}

func (m *Modules) reconcileTimeout() time.Duration {
	if m.ReconcileTimeout > 0 {
		return m.ReconcileTimeout
	}
	return DefaultModuleReconcileTimeout
}

// reconcile runs one bounded pass of the manager over the runtime's Kyma resource in ns.
func (m *Modules) reconcile(ctx context.Context, mgr *modulemanager.Manager, ns string) error {
	ctx, cancel := context.WithTimeout(ctx, m.reconcileTimeout())
	defer cancel()
	if _, err := mgr.Reconcile(ctx, ns+"/"+KymaName); err != nil {
		return fmt.Errorf("installing the runtime's modules: %w", err)
	}
	return nil
}
