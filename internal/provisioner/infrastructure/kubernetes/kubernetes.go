// Package kubernetes is the backend that runs each runtime as a dedicated workload (StatefulSet,
// Service, Ingress) in a namespace of a host cluster. The objects come from Go text/templates
// (the embedded defaults in templates/, or files) and are applied with server-side apply.
//
// Spec:
//
//	{"namespace": "kyma-runtimes", "kubeconfig_path": "/host/kubeconfig" | "kubeconfig": "...",
//	 "host": "*.runtimes.example.com", "image": "europe-docker.pkg.dev/kyma/runtime:1.0",
//	 "timeout_seconds": 600,
//	 "template_paths": {"statefulset": "...", "service": "...", "http_ingress": "..."}}
//
// '*' in host is replaced by the runtime ID; the result is the runtime's domain. A template
// path left out uses the embedded default. Templates get TemplateData; every object they
// render is put into the namespace, named .Name unless the template names it, and labelled
// with LabelRuntimeID and LabelManagedBy (used to find the runtime's objects again).
package kubernetes

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
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

//go:embed templates/*.yaml
var defaultTemplates embed.FS

// Spec configures the backend.
type Spec struct {
	Namespace      string        `json:"namespace"`
	KubeconfigPath string        `json:"kubeconfig_path"`
	Kubeconfig     string        `json:"kubeconfig"`
	Host           string        `json:"host"`
	Image          string        `json:"image"`
	TimeoutSeconds int           `json:"timeout_seconds"`
	TemplatePaths  TemplatePaths `json:"template_paths"`
}

// TemplatePaths are template files replacing the embedded defaults.
type TemplatePaths struct {
	StatefulSet string `json:"statefulset"`
	Service     string `json:"service"`
	HTTPIngress string `json:"http_ingress"`
}

// TemplateData is what the templates are executed with.
type TemplateData struct {
	RuntimeID string
	// Name is the default name of the runtime's objects: "kyma-" and the runtime ID.
	Name      string
	Namespace string
	Image     string
	// Host is spec.host with '*' replaced by the runtime ID.
	Host   string
	Labels map[string]string
}

// Validate checks the spec.
func (s Spec) Validate() error {
	switch {
	case s.Namespace == "":
		return errors.New("spec.namespace is required")
	case len(validation.IsDNS1123Label(s.Namespace)) > 0:
		return fmt.Errorf("spec.namespace %q is not a valid namespace name", s.Namespace)
	case s.Host == "":
		return errors.New("spec.host is required")
	case strings.Contains(s.Host, "://"):
		return fmt.Errorf("spec.host %q must be a DNS name, not a URL", s.Host)
	case s.Image == "":
		return errors.New("spec.image is required")
	case s.TimeoutSeconds < 0:
		return errors.New("spec.timeout_seconds must not be negative")
	}
	return s.source().Validate("spec")
}

func (s Spec) source() kubeconfig.Source {
	return kubeconfig.Source{Inline: s.Kubeconfig, Path: s.KubeconfigPath}
}

// namedTemplate is one parsed template; the statefulset one must render a StatefulSet.
type namedTemplate struct {
	field string // spec field, for messages
	tmpl  *template.Template
}

// Backend runs runtimes in one namespace of one host cluster.
type Backend struct {
	spec      Spec
	templates []namedTemplate // statefulset first
	dyn       dynamic.Interface
	mapper    meta.ResettableRESTMapper
	now       func() time.Time
	log       logrus.FieldLogger
}

var _ infrastructure.Backend = (*Backend)(nil)

// Option changes a Backend.
type Option func(*Backend)

// WithNow sets the clock used for the readiness timeout (tests).
func WithNow(now func() time.Time) Option { return func(b *Backend) { b.now = now } }

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

// NewForConfig uses cfg to talk to the host cluster (the spec's kubeconfig is still what
// Kubeconfig returns).
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
		now:       time.Now,
		log:       log.WithField("namespace", spec.Namespace),
	}
	for _, o := range opts {
		o(b)
	}
	return b, nil
}

// Factory builds the backend of a provisioner set entry.
func Factory(_ context.Context, e infrastructure.Entry, deps infrastructure.Deps) (infrastructure.Backend, error) {
	var spec Spec
	if err := infrastructure.DecodeSpec(e.Spec, &spec); err != nil {
		return nil, err
	}
	return New(spec, deps.Log)
}

func parseTemplates(paths TemplatePaths) ([]namedTemplate, error) {
	var out []namedTemplate
	for _, t := range []struct{ field, path, embedded string }{
		{"statefulset", paths.StatefulSet, "statefulset.yaml"},
		{"service", paths.Service, "service.yaml"},
		{"http_ingress", paths.HTTPIngress, "http_ingress.yaml"},
	} {
		field := "spec.template_paths." + t.field
		var (
			text []byte
			err  error
		)
		if t.path != "" {
			text, err = os.ReadFile(t.path)
		} else {
			text, err = defaultTemplates.ReadFile("templates/" + t.embedded)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		tmpl, err := template.New(t.field).Option("missingkey=error").Parse(string(text))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		out = append(out, namedTemplate{field: field, tmpl: tmpl})
	}
	return out, nil
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// data is the template data of a runtime.
func (b *Backend) data(spec infrastructure.Spec) (TemplateData, error) {
	if spec.RuntimeID == "" {
		return TemplateData{}, errors.New("runtime ID is empty")
	}
	if errs := validation.IsValidLabelValue(spec.RuntimeID); len(errs) > 0 {
		return TemplateData{}, fmt.Errorf("runtime ID %q cannot be a label value: %s", spec.RuntimeID, strings.Join(errs, "; "))
	}
	// A StatefulSet name leaves room for the pod's controller-revision-hash label.
	name := strings.Trim(nonName.ReplaceAllString(strings.ToLower("kyma-"+spec.RuntimeID), "-"), "-")
	if len(name) > 52 {
		name = strings.TrimRight(name[:52], "-")
	}
	return TemplateData{
		RuntimeID: spec.RuntimeID,
		Name:      name,
		Namespace: b.spec.Namespace,
		Image:     b.spec.Image,
		Host:      strings.ReplaceAll(b.spec.Host, "*", spec.RuntimeID),
		Labels:    map[string]string{LabelRuntimeID: spec.RuntimeID, LabelManagedBy: ManagedBy},
	}, nil
}

// object is a rendered object and its resource.
type object struct {
	u   *unstructured.Unstructured
	gvr schema.GroupVersionResource
}

// render executes the templates for the runtime; the StatefulSet comes first.
func (b *Backend) render(spec infrastructure.Spec) ([]object, TemplateData, error) {
	d, err := b.data(spec)
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
			u.SetName(d.Name)
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
	objs, _, err := b.render(spec)
	if err != nil {
		return 0, fmt.Errorf("rendering templates: %w", err)
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

// Status: Succeeded when the StatefulSet has observed its generation and all replicas are
// ready; InProgress before that, or Failed once spec.timeout_seconds have passed since
// spec.RequestedAt. The domain is the runtime's host.
func (b *Backend) Status(ctx context.Context, spec infrastructure.Spec) (infrastructure.Status, error) {
	st, err := b.status(ctx, spec)
	if err != nil {
		return infrastructure.Status{}, fmt.Errorf("getting the status of runtime %s: %w", spec.RuntimeID, err)
	}
	return st, nil
}

func (b *Backend) status(ctx context.Context, spec infrastructure.Spec) (infrastructure.Status, error) {
	objs, d, err := b.render(spec)
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
	st := infrastructure.Status{Domain: d.Host, Phase: infrastructure.PhaseInProgress}
	switch {
	case observed >= s.GetGeneration() && ready == replicas:
		st.Phase, st.ObservedRevision = infrastructure.PhaseSucceeded, observed
	case b.spec.TimeoutSeconds > 0 && !spec.RequestedAt.IsZero() &&
		b.now().Sub(spec.RequestedAt) > time.Duration(b.spec.TimeoutSeconds)*time.Second:
		st.Phase = infrastructure.PhaseFailed
		st.Reason = fmt.Sprintf("StatefulSet %s/%s not ready %ds after the request: %d of %d replicas ready",
			s.GetNamespace(), s.GetName(), b.spec.TimeoutSeconds, ready, replicas)
	}
	return st, nil
}

// Kubeconfig is the host cluster's kubeconfig (from the spec).
func (b *Backend) Kubeconfig(_ context.Context, spec infrastructure.Spec) (string, error) {
	kc, err := b.spec.source().Read()
	if err != nil {
		return "", fmt.Errorf("getting the kubeconfig of runtime %s: %w", spec.RuntimeID, err)
	}
	return string(kc), nil
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
func (b *Backend) resources(spec infrastructure.Spec) ([]schema.GroupVersionResource, error) {
	objs, _, err := b.render(spec)
	if err != nil {
		return nil, fmt.Errorf("rendering templates: %w", err)
	}
	seen := map[schema.GroupVersionResource]bool{}
	var out []schema.GroupVersionResource
	for _, o := range objs {
		if !seen[o.gvr] {
			seen[o.gvr] = true
			out = append(out, o.gvr)
		}
	}
	return out, nil
}

func selector(runtimeID string) string {
	return LabelRuntimeID + "=" + runtimeID + "," + LabelManagedBy + "=" + ManagedBy
}

// Delete deletes every object of the runtime's kinds labelled with its ID (foreground
// propagation); objects already gone are fine.
func (b *Backend) Delete(ctx context.Context, spec infrastructure.Spec) error {
	if err := b.delete(ctx, spec); err != nil {
		return fmt.Errorf("deleting runtime %s: %w", spec.RuntimeID, err)
	}
	b.logFor(spec).Info("runtime objects deleted")
	return nil
}

func (b *Backend) delete(ctx context.Context, spec infrastructure.Spec) error {
	gvrs, err := b.resources(spec)
	if err != nil {
		return err
	}
	fg := metav1.DeletePropagationForeground
	for _, gvr := range gvrs {
		ri := b.dyn.Resource(gvr).Namespace(b.spec.Namespace)
		list, err := ri.List(ctx, metav1.ListOptions{LabelSelector: selector(spec.RuntimeID)})
		if err != nil {
			return fmt.Errorf("listing %s: %w", gvr.Resource, err)
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
	return nil
}

// Deleted is true when no object of the runtime's kinds carries its label.
func (b *Backend) Deleted(ctx context.Context, spec infrastructure.Spec) (bool, error) {
	gvrs, err := b.resources(spec)
	if err != nil {
		return false, fmt.Errorf("checking whether runtime %s is deleted: %w", spec.RuntimeID, err)
	}
	for _, gvr := range gvrs {
		list, err := b.dyn.Resource(gvr).Namespace(b.spec.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector(spec.RuntimeID), Limit: 1})
		if err != nil {
			return false, fmt.Errorf("checking whether runtime %s is deleted: listing %s: %w", spec.RuntimeID, gvr.Resource, err)
		}
		if len(list.Items) > 0 {
			return false, nil
		}
	}
	return true, nil
}
