// Package kubernetes is the backend that runs each runtime as a dedicated workload (StatefulSet,
// Service, HTTP and gRPC Ingresses) in a namespace of its own on a host cluster (seed 004's
// "kubernetes" provisioner). The objects come from Go text/templates (seed 004's four templates
// are the embedded defaults in templates/, files replace them) and are applied with server-side
// apply.
//
// Spec (seed 004's example is accepted as written):
//
//	{"timeout_seconds": 30, "data_dir": "/mnt/data", "host": "http://node-*.localhost",
//	 "namespace": "cloud-runtime", "image": "rilldata/rill", "kubeconfig_path": "kubeconfig.yaml",
//	 "template_paths": {"http_ingress": "...", "grpc_ingress": "...", "service": "...", "statefulset": "..."}}
//
// and, beyond the seed: "kubeconfig" (inline instead of kubeconfig_path), "image_tag" (else the
// requested Kyma version, else "latest"), "ping_path" (default /v1/ping),
// "token_expiration_seconds" (of the runtimes' kubeconfigs, default 3600, at least 600) and
// "machine_types" ({"<type>": {"cpu": 4, "memory_gb": 16}}, for machine types the built-in
// table does not know).
//
// '*' in host is replaced by the runtime ID: the result is the runtime's URL; its host name is
// the Ingresses' host (.Host). A runtime lives in namespace "<namespace>-<runtime ID>", where
// it has a ServiceAccount of its own, bound to that namespace only; Kubeconfig returns a
// kubeconfig with a short-lived token of it, never the host cluster's credentials. Templates get
// TemplateData; every object they render is put into the runtime's namespace, named after its
// template (Names) unless the template names it, and labelled with LabelRuntimeID and
// LabelManagedBy (used to find the runtime's objects again).
//
// A runtime is ready when its StatefulSet has all replicas ready and then an HTTP GET of its
// URL and ping_path answers 2xx, both within timeout_seconds of the request.
package kubernetes

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/internal/kubeconfig"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/internal/scoped"
)

// Type is the backend type name in the provisioner set.
const Type = "kubernetes"

// FieldManager is the server-side apply field manager.
const FieldManager = "keb-provisioner"

// Labels on every object of a runtime.
const (
	LabelRuntimeID = "kyma-project.io/runtime-id"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "keb"
)

// RuntimeAccount is the ServiceAccount of a runtime's own kubeconfig.
const RuntimeAccount = "runtime"

// Defaults of optional spec fields.
const (
	DefaultPingPath                 = "/v1/ping"
	DefaultTokenExpirationSeconds   = 3600
	DefaultImageTag                 = "latest"
	DefaultStorageGB                = 40
	maxNamespacePrefix              = 63 - 1 - 16
	pingTimeout                     = 5 * time.Second
	defaultCPUPerSlot, defaultMemGB = 1, 2
)

//go:embed templates/*.yaml
var defaultTemplates embed.FS

// Spec configures the backend.
type Spec struct {
	Namespace              string                 `json:"namespace"`
	KubeconfigPath         string                 `json:"kubeconfig_path"`
	Kubeconfig             string                 `json:"kubeconfig"`
	Host                   string                 `json:"host"`
	Image                  string                 `json:"image"`
	ImageTag               string                 `json:"image_tag"`
	DataDir                string                 `json:"data_dir"`
	TimeoutSeconds         int                    `json:"timeout_seconds"`
	PingPath               string                 `json:"ping_path"`
	TokenExpirationSeconds int                    `json:"token_expiration_seconds"`
	MachineTypes           map[string]MachineSize `json:"machine_types"`
	TemplatePaths          TemplatePaths          `json:"template_paths"`
}

// MachineSize is what one slot of a machine type gives a runtime.
type MachineSize struct {
	CPU      int `json:"cpu"`
	MemoryGB int `json:"memory_gb"`
}

// TemplatePaths are template files replacing the embedded defaults.
type TemplatePaths struct {
	StatefulSet string `json:"statefulset"`
	Service     string `json:"service"`
	HTTPIngress string `json:"http_ingress"`
	GRPCIngress string `json:"grpc_ingress"`
}

// Names are the default names of a runtime's objects, one per template.
type Names struct {
	StatefulSet string
	Service     string
	HTTPIngress string
	GRPCIngress string
}

// TemplateData is what the templates are executed with (seed 004's variables and more).
type TemplateData struct {
	RuntimeID string
	// Name is the base of the Names: "kyma-" and the runtime ID.
	Name  string
	Names Names
	// Namespace is the runtime's own namespace.
	Namespace string
	Image     string
	ImageTag  string
	// Host is the host name of the runtime's URL (spec.host with '*' replaced by the runtime
	// ID); URL is the whole URL.
	Host string
	URL  string
	// CPU (cores), MemoryGB and StorageBytes: the machine type's size times Slots.
	CPU          int
	MemoryGB     int
	StorageBytes int64
	Slots        int
	DataDir      string
	Labels       map[string]string
}

// Validate checks the spec and fills in defaults.
func (s *Spec) Validate() error {
	switch {
	case s.Namespace == "":
		return errors.New("spec.namespace is required")
	case len(validation.IsDNS1123Label(s.Namespace)) > 0:
		return fmt.Errorf("spec.namespace %q is not a valid namespace name", s.Namespace)
	case len(s.Namespace) > maxNamespacePrefix:
		return fmt.Errorf("spec.namespace %q is longer than %d characters (runtimes' namespaces add their ID)", s.Namespace, maxNamespacePrefix)
	case s.Host == "":
		return errors.New("spec.host is required")
	case s.Image == "":
		return errors.New("spec.image is required")
	case strings.Contains(s.Image[strings.LastIndex(s.Image, "/")+1:], ":"):
		return fmt.Errorf("spec.image %q carries a tag: the templates add .ImageTag (set spec.image_tag)", s.Image)
	case s.DataDir == "":
		return errors.New("spec.data_dir is required (the templates mount the runtime's volume there)")
	case !strings.HasPrefix(s.DataDir, "/"):
		return fmt.Errorf("spec.data_dir %q must be an absolute path", s.DataDir)
	case s.TimeoutSeconds < 0:
		return errors.New("spec.timeout_seconds must not be negative")
	case s.TokenExpirationSeconds != 0 && time.Duration(s.TokenExpirationSeconds)*time.Second < scoped.MinExpiration:
		return fmt.Errorf("spec.token_expiration_seconds must be at least %d", int(scoped.MinExpiration/time.Second))
	}
	if _, err := hostURL(s.Host, "x"); err != nil {
		return fmt.Errorf("spec.host: %w", err)
	}
	if s.PingPath == "" {
		s.PingPath = DefaultPingPath
	}
	if !strings.HasPrefix(s.PingPath, "/") {
		return fmt.Errorf("spec.ping_path %q must start with /", s.PingPath)
	}
	if s.TokenExpirationSeconds == 0 {
		s.TokenExpirationSeconds = DefaultTokenExpirationSeconds
	}
	for name, size := range s.MachineTypes {
		if size.CPU <= 0 || size.MemoryGB <= 0 {
			return fmt.Errorf("spec.machine_types[%q]: cpu and memory_gb must be > 0", name)
		}
	}
	return s.source().Validate("spec")
}

// hostURL is the runtime's URL: host with '*' replaced by the runtime ID. A host without a
// scheme is an https host name.
func hostURL(host, runtimeID string) (*url.URL, error) {
	raw := strings.ReplaceAll(host, "*", runtimeID)
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL: %w", host, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%q: the scheme must be http or https", host)
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.User != nil:
		return nil, fmt.Errorf("%q must be a scheme and host only", host)
	}
	if errs := validation.IsDNS1123Subdomain(u.Hostname()); len(errs) > 0 {
		return nil, fmt.Errorf("%q: host name %q is not a DNS name: %s", host, u.Hostname(), strings.Join(errs, "; "))
	}
	u.Path = ""
	return u, nil
}

func (s Spec) source() kubeconfig.Source {
	return kubeconfig.Source{Inline: s.Kubeconfig, Path: s.KubeconfigPath}
}

// namedTemplate is one parsed template; the statefulset one must render a StatefulSet.
type namedTemplate struct {
	field string // spec field, for messages
	name  func(Names) string
	tmpl  *template.Template
}

// Backend runs runtimes in namespaces of one host cluster.
type Backend struct {
	spec      Spec
	templates []namedTemplate // statefulset first
	dyn       dynamic.Interface
	mapper    meta.ResettableRESTMapper
	issuer    *scoped.Issuer
	http      *http.Client
	now       func() time.Time
	log       logrus.FieldLogger
}

var (
	_ infrastructure.Backend             = (*Backend)(nil)
	_ infrastructure.CredentialIssuer    = (*Backend)(nil)
	_ infrastructure.AdministratorBinder = (*Backend)(nil)
)

// Option changes a Backend.
type Option func(*Backend)

// WithNow sets the clock used for the readiness timeout (tests).
func WithNow(now func() time.Time) Option { return func(b *Backend) { b.now = now } }

// WithHTTPClient sets the client of the readiness ping.
func WithHTTPClient(c *http.Client) Option { return func(b *Backend) { b.http = c } }

// New connects to the host cluster of spec's kubeconfig and parses the templates.
func New(spec Spec, log logrus.FieldLogger, opts ...Option) (*Backend, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	cfg, err := spec.source().RESTConfig()
	if err != nil {
		return nil, fmt.Errorf("spec: host cluster kubeconfig: %w", err)
	}
	return NewForConfig(spec, cfg, log, opts...)
}

// NewForConfig uses cfg to talk to the host cluster.
func NewForConfig(spec Spec, cfg *rest.Config, log logrus.FieldLogger, opts ...Option) (*Backend, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	templates, err := parseTemplates(spec.TemplatePaths)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the host cluster client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the host cluster discovery client: %w", err)
	}
	issuer, err := scoped.New(cfg)
	if err != nil {
		return nil, err
	}
	if log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		log = l
	}
	b := &Backend{
		spec:      spec,
		templates: templates,
		dyn:       dyn,
		mapper:    restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
		issuer:    issuer,
		http:      &http.Client{Timeout: pingTimeout, Transport: localhostTransport()},
		now:       time.Now,
		log:       log.WithField("namespace", spec.Namespace),
	}
	for _, o := range opts {
		o(b)
	}
	return b, nil
}

// localhostTransport dials names under .localhost on the loopback interface (RFC 6761), so
// that seed 004's "http://node-*.localhost" works on a workstation without DNS entries.
func localhostTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: pingTimeout}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err == nil && strings.HasSuffix(strings.ToLower(host), ".localhost") {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
		return d.DialContext(ctx, network, addr)
	}
	return t
}

// Factory builds the backend of a provisioner set entry.
func Factory(_ context.Context, e infrastructure.Entry, deps infrastructure.Deps) (infrastructure.Backend, error) {
	var spec Spec
	if err := infrastructure.DecodeSpec(e.Spec, &spec); err != nil {
		return nil, err
	}
	return New(spec, deps.Log)
}

// DefaultTemplate returns an embedded default template ("statefulset", "service",
// "http_ingress", "grpc_ingress").
func DefaultTemplate(field string) ([]byte, error) {
	return defaultTemplates.ReadFile("templates/" + field + ".yaml")
}

func parseTemplates(paths TemplatePaths) ([]namedTemplate, error) {
	var out []namedTemplate
	for _, t := range []struct {
		field, path string
		name        func(Names) string
	}{
		{"statefulset", paths.StatefulSet, func(n Names) string { return n.StatefulSet }},
		{"service", paths.Service, func(n Names) string { return n.Service }},
		{"http_ingress", paths.HTTPIngress, func(n Names) string { return n.HTTPIngress }},
		{"grpc_ingress", paths.GRPCIngress, func(n Names) string { return n.GRPCIngress }},
	} {
		field := "spec.template_paths." + t.field
		var (
			text []byte
			err  error
		)
		if t.path != "" {
			text, err = os.ReadFile(t.path)
		} else {
			text, err = DefaultTemplate(t.field)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		tmpl, err := template.New(t.field).Option("missingkey=error").Parse(string(text))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		out = append(out, namedTemplate{field: field, name: t.name, tmpl: tmpl})
	}
	return out, nil
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace is the runtime's own namespace: "<spec.namespace>-<runtime ID>", with a hash of
// the ID when that would be too long or not a name.
func (b *Backend) Namespace(runtimeID string) string {
	id := strings.ToLower(runtimeID)
	ns := b.spec.Namespace + "-" + id
	if len(validation.IsDNS1123Label(ns)) == 0 {
		return ns
	}
	sum := sha256.Sum256([]byte(runtimeID))
	return b.spec.Namespace + "-" + hex.EncodeToString(sum[:8])
}

// size is the runtime's CPU and memory per slot, from its machine type.
func (b *Backend) size(machineType string) (MachineSize, error) {
	if s, ok := b.spec.MachineTypes[machineType]; ok {
		return s, nil
	}
	if machineType == "" {
		return MachineSize{CPU: defaultCPUPerSlot, MemoryGB: defaultMemGB}, nil
	}
	if s, ok := KnownMachineSize(machineType); ok {
		return s, nil
	}
	return MachineSize{}, fmt.Errorf("machine type %q has no known size: add it to spec.machine_types", machineType)
}

// Machine type patterns of the plans' providers.
var (
	azureType     = regexp.MustCompile(`^Standard_[A-Z](\d+)[a-z]*_v\d+$`)
	awsType       = regexp.MustCompile(`^([a-z])\d+[a-z]*\.(\d*)(x?)large$`)
	gcpType       = regexp.MustCompile(`^[a-z]\d+[a-z]?-(standard|highmem|highcpu)-(\d+)$`)
	openstackType = regexp.MustCompile(`^g_c(\d+)_m(\d+)$`)
)

// KnownMachineSize sizes the machine types of the plans (Azure Standard_D4s_v5, AWS
// m6i.xlarge, GCP n2-standard-4, OpenStack g_c4_m16).
func KnownMachineSize(machineType string) (MachineSize, bool) {
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	if m := azureType.FindStringSubmatch(machineType); m != nil && atoi(m[1]) > 0 {
		return MachineSize{CPU: atoi(m[1]), MemoryGB: 4 * atoi(m[1])}, true
	}
	if m := awsType.FindStringSubmatch(machineType); m != nil {
		cpu := 2
		if m[3] == "x" {
			cpu = 4
			if m[2] != "" {
				cpu = 4 * atoi(m[2])
			}
		} else if m[2] != "" {
			return MachineSize{}, false
		}
		perCPU := map[string]int{"c": 2, "r": 8, "x": 16}[m[1]]
		if perCPU == 0 {
			perCPU = 4
		}
		return MachineSize{CPU: cpu, MemoryGB: perCPU * cpu}, cpu > 0
	}
	if m := gcpType.FindStringSubmatch(machineType); m != nil && atoi(m[2]) > 0 {
		perCPU := map[string]int{"standard": 4, "highmem": 8, "highcpu": 1}[m[1]]
		return MachineSize{CPU: atoi(m[2]), MemoryGB: perCPU * atoi(m[2])}, true
	}
	if m := openstackType.FindStringSubmatch(machineType); m != nil && atoi(m[1]) > 0 && atoi(m[2]) > 0 {
		return MachineSize{CPU: atoi(m[1]), MemoryGB: atoi(m[2])}, true
	}
	return MachineSize{}, false
}

// data is the template data of a runtime; strict fails on an unknown machine type (creating
// and updating), otherwise it sizes the runtime by the default (finding objects to delete).
func (b *Backend) data(spec infrastructure.Spec, strict bool) (TemplateData, error) {
	if spec.RuntimeID == "" {
		return TemplateData{}, errors.New("runtime ID is empty")
	}
	if errs := validation.IsValidLabelValue(spec.RuntimeID); len(errs) > 0 {
		return TemplateData{}, fmt.Errorf("runtime ID %q cannot be a label value: %s", spec.RuntimeID, strings.Join(errs, "; "))
	}
	u, err := hostURL(b.spec.Host, strings.ToLower(spec.RuntimeID))
	if err != nil {
		return TemplateData{}, fmt.Errorf("the runtime's host: %w", err)
	}
	size, err := b.size(spec.Cluster.MachineType)
	if err != nil {
		if strict {
			return TemplateData{}, err
		}
		size = MachineSize{CPU: defaultCPUPerSlot, MemoryGB: defaultMemGB}
	}
	slots := spec.Slots
	if slots < 1 {
		slots = 1
	}
	storageGB := spec.Cluster.VolumeSizeGB
	if storageGB <= 0 {
		storageGB = DefaultStorageGB
	}
	tag := b.spec.ImageTag
	if tag == "" {
		tag = spec.Version
	}
	if tag == "" {
		tag = DefaultImageTag
	}
	// A StatefulSet name leaves room for the pod's controller-revision-hash label.
	name := strings.Trim(nonName.ReplaceAllString(strings.ToLower("kyma-"+spec.RuntimeID), "-"), "-")
	if len(name) > 47 {
		name = strings.TrimRight(name[:47], "-")
	}
	return TemplateData{
		RuntimeID:    spec.RuntimeID,
		Name:         name,
		Names:        Names{StatefulSet: name, Service: name, HTTPIngress: name + "-http", GRPCIngress: name + "-grpc"},
		Namespace:    b.Namespace(spec.RuntimeID),
		Image:        b.spec.Image,
		ImageTag:     tag,
		Host:         u.Hostname(),
		URL:          u.String(),
		CPU:          size.CPU * slots,
		MemoryGB:     size.MemoryGB * slots,
		StorageBytes: int64(storageGB) * int64(slots) << 30,
		Slots:        slots,
		DataDir:      b.spec.DataDir,
		Labels:       map[string]string{LabelRuntimeID: spec.RuntimeID, LabelManagedBy: ManagedBy},
	}, nil
}

// allocation is what the runtime is given.
func allocation(d TemplateData) *infrastructure.Allocation {
	return &infrastructure.Allocation{
		Host: d.URL, AudienceURL: d.URL, CPU: d.CPU, MemoryGB: d.MemoryGB, StorageBytes: d.StorageBytes,
		DataDir: d.DataDir, Slots: d.Slots, Namespace: d.Namespace,
	}
}

// object is a rendered object and its resource.
type object struct {
	u   *unstructured.Unstructured
	gvr schema.GroupVersionResource
}

// render executes the templates for the runtime; the StatefulSet comes first.
func (b *Backend) render(spec infrastructure.Spec, strict bool) ([]object, TemplateData, error) {
	d, err := b.data(spec, strict)
	if err != nil {
		return nil, d, err
	}
	var out []object
	for i, t := range b.templates {
		var buf bytes.Buffer
		if err := t.tmpl.Execute(&buf, d); err != nil {
			return nil, d, fmt.Errorf("%s: %w", t.field, err)
		}
		js, err := yaml.YAMLToJSON(buf.Bytes())
		if err != nil {
			return nil, d, fmt.Errorf("%s: rendered YAML: %w", t.field, err)
		}
		if s := string(bytes.TrimSpace(js)); s == "null" || s == "" {
			if i == 0 {
				return nil, d, fmt.Errorf("%s rendered nothing", t.field)
			}
			continue // an optional object the template left out
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, d, fmt.Errorf("%s: rendered object: %w", t.field, err)
		}
		gvk := u.GroupVersionKind()
		if i == 0 && (gvk.Group != "apps" || gvk.Kind != "StatefulSet") {
			return nil, d, fmt.Errorf("%s must render an apps StatefulSet, not %s", t.field, gvk)
		}
		if u.GetName() == "" {
			u.SetName(t.name(d.Names))
		}
		u.SetNamespace(d.Namespace)
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		for k, v := range d.Labels {
			labels[k] = v
		}
		u.SetLabels(labels)
		gvr, err := b.resource(gvk)
		if err != nil {
			return nil, d, fmt.Errorf("%s: %w", t.field, err)
		}
		out = append(out, object{u: u, gvr: gvr})
	}
	return out, d, nil
}

// resource maps a kind to its namespaced resource, refreshing discovery once on a miss.
func (b *Backend) resource(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	m, err := b.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		b.mapper.Reset()
		m, err = b.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("finding the resource of %s: %w", gvk, err)
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return schema.GroupVersionResource{}, fmt.Errorf("%s is not namespaced", gvk)
	}
	return m.Resource, nil
}

func (b *Backend) logFor(spec infrastructure.Spec) logrus.FieldLogger {
	return b.log.WithFields(logrus.Fields{"runtime_id": spec.RuntimeID, "operation_id": spec.OperationID})
}

// apply renders and applies the runtime's objects and returns the StatefulSet's generation.
func (b *Backend) apply(ctx context.Context, spec infrastructure.Spec) (int64, error) {
	objs, d, err := b.render(spec, true)
	if err != nil {
		return 0, fmt.Errorf("rendering templates: %w", err)
	}
	if err := b.issuer.Grant(ctx, d.Namespace, RuntimeAccount, d.Labels); err != nil {
		return 0, fmt.Errorf("preparing the runtime's namespace: %w", err)
	}
	var gen int64
	for i, o := range objs {
		out, err := b.dyn.Resource(o.gvr).Namespace(o.u.GetNamespace()).
			Apply(ctx, o.u.GetName(), o.u, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
		if err != nil {
			return 0, fmt.Errorf("applying %s %s/%s: %w", o.u.GetKind(), o.u.GetNamespace(), o.u.GetName(), err)
		}
		if i == 0 {
			gen = out.GetGeneration()
		}
	}
	return gen, nil
}

// Create applies the runtime's objects (again, harmlessly, when they exist).
func (b *Backend) Create(ctx context.Context, spec infrastructure.Spec) error {
	if _, err := b.apply(ctx, spec); err != nil {
		return fmt.Errorf("creating runtime %s: %w", spec.RuntimeID, err)
	}
	b.logFor(spec).Info("runtime objects applied")
	return nil
}

// Status: Succeeded when the StatefulSet has observed its generation, all replicas are ready
// and a GET of the runtime's URL and ping path answers 2xx; InProgress before that, or Failed
// once spec.timeout_seconds have passed since spec.RequestedAt. The domain is the runtime's
// host name; the allocation says what the runtime was given.
func (b *Backend) Status(ctx context.Context, spec infrastructure.Spec) (infrastructure.Status, error) {
	st, err := b.status(ctx, spec)
	if err != nil {
		return infrastructure.Status{}, fmt.Errorf("getting the status of runtime %s: %w", spec.RuntimeID, err)
	}
	return st, nil
}

func (b *Backend) status(ctx context.Context, spec infrastructure.Spec) (infrastructure.Status, error) {
	objs, d, err := b.render(spec, false)
	if err != nil {
		return infrastructure.Status{}, fmt.Errorf("rendering templates: %w", err)
	}
	ss := objs[0]
	s, err := b.dyn.Resource(ss.gvr).Namespace(ss.u.GetNamespace()).Get(ctx, ss.u.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return infrastructure.Status{}, fmt.Errorf("StatefulSet %s/%s: %w", ss.u.GetNamespace(), ss.u.GetName(), infrastructure.ErrNotFound)
	}
	if err != nil {
		return infrastructure.Status{}, err
	}
	if owner := s.GetLabels()[LabelRuntimeID]; owner != spec.RuntimeID {
		return infrastructure.Status{}, fmt.Errorf("StatefulSet %s/%s belongs to runtime %q", s.GetNamespace(), s.GetName(), owner)
	}
	replicas, found, _ := unstructured.NestedInt64(s.Object, "spec", "replicas")
	if !found {
		replicas = 1
	}
	ready, _, _ := unstructured.NestedInt64(s.Object, "status", "readyReplicas")
	observed, _, _ := unstructured.NestedInt64(s.Object, "status", "observedGeneration")
	st := infrastructure.Status{Domain: d.Host, Phase: infrastructure.PhaseInProgress, Allocation: allocation(d)}
	var waiting string
	switch {
	case observed < s.GetGeneration() || ready != replicas:
		waiting = fmt.Sprintf("StatefulSet %s/%s: %d of %d replicas ready", s.GetNamespace(), s.GetName(), ready, replicas)
	default:
		if err := b.ping(ctx, d.URL+b.spec.PingPath); err != nil {
			waiting = err.Error()
		}
	}
	switch {
	case waiting == "":
		st.Phase, st.ObservedRevision = infrastructure.PhaseSucceeded, observed
	case b.spec.TimeoutSeconds > 0 && !spec.RequestedAt.IsZero() &&
		b.now().Sub(spec.RequestedAt) > time.Duration(b.spec.TimeoutSeconds)*time.Second:
		st.Phase = infrastructure.PhaseFailed
		st.Reason = fmt.Sprintf("runtime not ready %ds after the request: %s", b.spec.TimeoutSeconds, waiting)
	default:
		st.Reason = waiting
	}
	return st, nil
}

// ping makes one bounded GET of the runtime's ping URL.
func (b *Backend) ping(ctx context.Context, target string) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", target, err)
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", target, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("GET %s: %s", target, resp.Status)
	}
	return nil
}

// Kubeconfig is a kubeconfig of the runtime's own ServiceAccount, confined to its namespace,
// with a token valid for spec.token_expiration_seconds.
func (b *Backend) Kubeconfig(ctx context.Context, spec infrastructure.Spec) (string, error) {
	c, err := b.IssueCredentials(ctx, spec, RuntimeAccount, time.Duration(b.spec.TokenExpirationSeconds)*time.Second)
	if err != nil {
		return "", fmt.Errorf("getting the kubeconfig of runtime %s: %w", spec.RuntimeID, err)
	}
	return c.Kubeconfig, nil
}

// IssueCredentials creates account in the runtime's namespace (bound to that namespace only)
// and returns a kubeconfig with a token of it valid for expiration.
func (b *Backend) IssueCredentials(ctx context.Context, spec infrastructure.Spec, account string, expiration time.Duration) (infrastructure.Credentials, error) {
	d, err := b.data(spec, false)
	if err != nil {
		return infrastructure.Credentials{}, err
	}
	if err := b.issuer.Grant(ctx, d.Namespace, account, d.Labels); err != nil {
		return infrastructure.Credentials{}, err
	}
	c, err := b.issuer.Kubeconfig(ctx, d.Namespace, account, expiration)
	if err != nil {
		return infrastructure.Credentials{}, err
	}
	return infrastructure.Credentials{Kubeconfig: c.Kubeconfig, ExpiresAt: c.ExpiresAt}, nil
}

// BindAdministrators gives the users full rights on the runtime's namespace only.
func (b *Backend) BindAdministrators(ctx context.Context, spec infrastructure.Spec, users []string) error {
	d, err := b.data(spec, false)
	if err != nil {
		return err
	}
	if err := b.issuer.Grant(ctx, d.Namespace, RuntimeAccount, d.Labels); err != nil {
		return err
	}
	return b.issuer.BindUsers(ctx, d.Namespace, users, d.Labels)
}

// RevokeCredentials deletes account from the runtime's namespace; its tokens stop working.
func (b *Backend) RevokeCredentials(ctx context.Context, spec infrastructure.Spec, account string) error {
	d, err := b.data(spec, false)
	if err != nil {
		return err
	}
	return b.issuer.Revoke(ctx, d.Namespace, account)
}

// Update applies the objects again and returns the StatefulSet's generation.
func (b *Backend) Update(ctx context.Context, spec infrastructure.Spec) (int64, error) {
	gen, err := b.apply(ctx, spec)
	if err != nil {
		return 0, fmt.Errorf("updating runtime %s: %w", spec.RuntimeID, err)
	}
	b.logFor(spec).WithField("generation", gen).Info("runtime objects re-applied")
	return gen, nil
}

// Hibernate is not supported.
func (b *Backend) Hibernate(_ context.Context, spec infrastructure.Spec) error {
	return fmt.Errorf("hibernating runtime %s: dedicated Kubernetes runtimes cannot hibernate: %w", spec.RuntimeID, infrastructure.ErrNotSupported)
}

// resources are the resources of the runtime's objects (as the templates render them).
func (b *Backend) resources(spec infrastructure.Spec) ([]schema.GroupVersionResource, TemplateData, error) {
	objs, d, err := b.render(spec, false)
	if err != nil {
		return nil, d, fmt.Errorf("rendering templates: %w", err)
	}
	seen := map[schema.GroupVersionResource]bool{}
	var out []schema.GroupVersionResource
	for _, o := range objs {
		if !seen[o.gvr] {
			seen[o.gvr] = true
			out = append(out, o.gvr)
		}
	}
	return out, d, nil
}

// objectRef is where to look for a runtime's objects of one kind.
type objectRef struct {
	gvr       schema.GroupVersionResource
	namespace string
}

// objectRefs: every kind in the runtime's namespace and in spec.namespace, where runtimes
// provisioned before they had namespaces of their own keep their objects.
func objectRefs(gvrs []schema.GroupVersionResource, namespaces ...string) []objectRef {
	var out []objectRef
	for _, ns := range namespaces {
		for _, gvr := range gvrs {
			out = append(out, objectRef{gvr: gvr, namespace: ns})
		}
	}
	return out
}

func selector(runtimeID string) string {
	return LabelRuntimeID + "=" + runtimeID + "," + LabelManagedBy + "=" + ManagedBy
}

// Delete deletes every object of the runtime's kinds labelled with its ID (foreground
// propagation), revokes the runtime's own account and deletes its namespace (which takes the
// bindings' accounts with it); objects already gone are fine.
func (b *Backend) Delete(ctx context.Context, spec infrastructure.Spec) error {
	if err := b.delete(ctx, spec); err != nil {
		return fmt.Errorf("deleting runtime %s: %w", spec.RuntimeID, err)
	}
	b.logFor(spec).Info("runtime objects deleted")
	return nil
}

func (b *Backend) delete(ctx context.Context, spec infrastructure.Spec) error {
	gvrs, d, err := b.resources(spec)
	if err != nil {
		return err
	}
	fg := metav1.DeletePropagationForeground
	for _, ref := range objectRefs(gvrs, d.Namespace, b.spec.Namespace) {
		ri := b.dyn.Resource(ref.gvr).Namespace(ref.namespace)
		gvr := ref.gvr
		list, err := ri.List(ctx, metav1.ListOptions{LabelSelector: selector(spec.RuntimeID)})
		if err != nil {
			return fmt.Errorf("listing %s in %s: %w", gvr.Resource, ref.namespace, err)
		}
		for _, item := range list.Items {
			if item.GetDeletionTimestamp() != nil {
				continue
			}
			uid := item.GetUID()
			err := ri.Delete(ctx, item.GetName(), metav1.DeleteOptions{PropagationPolicy: &fg, Preconditions: &metav1.Preconditions{UID: &uid}})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting %s %s: %w", gvr.Resource, item.GetName(), err)
			}
		}
	}
	return b.issuer.Remove(ctx, d.Namespace, RuntimeAccount)
}

// Deleted is true when no object of the runtime's kinds carries its label and its account is
// gone.
func (b *Backend) Deleted(ctx context.Context, spec infrastructure.Spec) (bool, error) {
	gvrs, d, err := b.resources(spec)
	if err != nil {
		return false, fmt.Errorf("checking whether runtime %s is deleted: %w", spec.RuntimeID, err)
	}
	for _, ref := range objectRefs(gvrs, d.Namespace, b.spec.Namespace) {
		list, err := b.dyn.Resource(ref.gvr).Namespace(ref.namespace).List(ctx, metav1.ListOptions{LabelSelector: selector(spec.RuntimeID), Limit: 1})
		if err != nil {
			return false, fmt.Errorf("checking whether runtime %s is deleted: listing %s in %s: %w", spec.RuntimeID, ref.gvr.Resource, ref.namespace, err)
		}
		if len(list.Items) > 0 {
			return false, nil
		}
	}
	exists, err := b.issuer.Exists(ctx, d.Namespace, RuntimeAccount)
	if err != nil {
		return false, fmt.Errorf("checking whether runtime %s is deleted: %w", spec.RuntimeID, err)
	}
	return !exists, nil
}
