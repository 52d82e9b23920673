// Package gardener is the backend that creates runtimes as Gardener Shoots
// (core.gardener.cloud/v1beta1) in the project namespace garden-<project>, through client-go's
// dynamic client (no Gardener Go dependency).
//
// Spec:
//
//	{"project": "kyma-dev", "kubeconfig_path": "/gardener/kubeconfig" | "kubeconfig": "...",
//	 "cloud_profile_aws": "aws", "cloud_profile_gcp": "gcp", "cloud_profile_azure": "az",
//	 "cloud_profile_openstack": "...",
//	 "openstack_floating_pool_name": "...", "openstack_load_balancer_provider": "...",
//	 "kubeconfig_expiration_seconds": 3600,
//	 "audit_logs_policy_config_map": "audit-policy", "audit_logs_tenant": "...",
//	 "audit_log_service_url": "https://...", "audit_log_secret_name": "..."}
//
// Gardener does the work; this backend writes the Shoot and reads its status:
// spec.dns.domain, status.lastOperation and status.observedGeneration (the revision of Update),
// status.hibernated. Admin kubeconfigs come from the shoots/adminkubeconfig subresource
// (AdminKubeconfigRequest), valid for kubeconfig_expiration_seconds; the facts relied on are in
// shootcontract/testdata/gardener.json.
package gardener

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/internal/kubeconfig"
)

// Type is the backend type name in the provisioner set.
const Type = "gardener"

// FieldManager is the field manager of the backend's writes.
const FieldManager = "keb-provisioner"

// ShootGVR is the resource of Shoots.
var ShootGVR = schema.GroupVersionResource{Group: "core.gardener.cloud", Version: "v1beta1", Resource: "shoots"}

// Spec configures the backend.
type Spec struct {
	Project        string `json:"project"`
	KubeconfigPath string `json:"kubeconfig_path"`
	Kubeconfig     string `json:"kubeconfig"`
	// CloudProfile* name the CloudProfile of each provider's Shoots (Gardener rejects a Shoot
	// without one); empty means DefaultCloudProfiles. OpenStack's may also come with the
	// request (openStackConfig.cloudProfileName), which wins.
	CloudProfileAWS       string `json:"cloud_profile_aws"`
	CloudProfileGCP       string `json:"cloud_profile_gcp"`
	CloudProfileAzure     string `json:"cloud_profile_azure"`
	CloudProfileOpenStack string `json:"cloud_profile_openstack"`
	// OpenStack's InfrastructureConfig.floatingPoolName and ControlPlaneConfig.loadBalancerProvider
	// for requests that do not name them (the provider extension requires both).
	OpenStackFloatingPoolName     string `json:"openstack_floating_pool_name"`
	OpenStackLoadBalancerProvider string `json:"openstack_load_balancer_provider"`
	// KubeconfigExpirationSeconds is the validity asked of Gardener for admin kubeconfigs
	// (DefaultKubeconfigExpirationSeconds when 0; Gardener takes 600 up to 2^32, and caps it at
	// its --shoot-admin-kubeconfig-max-expiration, 24h by default).
	KubeconfigExpirationSeconds int64 `json:"kubeconfig_expiration_seconds"`
	// The audit log: the kube-apiserver's audit policy ConfigMap and the shoot-auditlog-service
	// extension (tenant, service URL, and the Secret in the project namespace with the service's
	// credentials); the extension needs all three of tenant, URL and Secret.
	AuditLogsPolicyConfigMap string `json:"audit_logs_policy_config_map"`
	AuditLogsTenant          string `json:"audit_logs_tenant"`
	AuditLogServiceURL       string `json:"audit_log_service_url"`
	AuditLogSecretName       string `json:"audit_log_secret_name"`
}

// DefaultCloudProfiles are the cloud profiles the original provisioner used per provider;
// OpenStack's has none (it came with the request).
var DefaultCloudProfiles = map[string]string{"aws": "aws", "gcp": "gcp", "azure": "az"}

// Bounds of kubeconfig_expiration_seconds (Gardener's AdminKubeconfigRequest validation) and
// its default (Gardener's own default).
const (
	DefaultKubeconfigExpirationSeconds = 3600
	MinKubeconfigExpirationSeconds     = 600
	MaxKubeconfigExpirationSeconds     = 1<<32 - 1
)

// Validate checks the spec.
func (s Spec) Validate() error {
	if s.Project == "" {
		return errors.New("spec.project is required")
	}
	if err := s.validateOptions(); err != nil {
		return err
	}
	return kubeconfig.Source{Inline: s.Kubeconfig, Path: s.KubeconfigPath}.Validate("spec")
}

func (s Spec) validateOptions() error {
	if e := s.KubeconfigExpirationSeconds; e != 0 && (e < MinKubeconfigExpirationSeconds || e > MaxKubeconfigExpirationSeconds) {
		return fmt.Errorf("spec.kubeconfig_expiration_seconds must be between %d and %d, not %d", MinKubeconfigExpirationSeconds, MaxKubeconfigExpirationSeconds, e)
	}
	audit := map[string]string{"audit_logs_tenant": s.AuditLogsTenant, "audit_log_service_url": s.AuditLogServiceURL, "audit_log_secret_name": s.AuditLogSecretName}
	var set, missing []string
	for _, k := range []string{"audit_logs_tenant", "audit_log_service_url", "audit_log_secret_name"} {
		if audit[k] != "" {
			set = append(set, "spec."+k)
		} else {
			missing = append(missing, "spec."+k)
		}
	}
	if len(set) > 0 && len(missing) > 0 {
		return fmt.Errorf("the audit log extension needs %s as well as %s", strings.Join(missing, " and "), strings.Join(set, " and "))
	}
	if s.AuditLogServiceURL != "" {
		if u, err := url.Parse(s.AuditLogServiceURL); err != nil || u.Scheme == "" || u.Host == "" {
			return fmt.Errorf("spec.audit_log_service_url must be an absolute URL, not %q", s.AuditLogServiceURL)
		}
	}
	return nil
}

// expirationSeconds is the validity to ask for admin kubeconfigs.
func (s Spec) expirationSeconds() int64 {
	if s.KubeconfigExpirationSeconds == 0 {
		return DefaultKubeconfigExpirationSeconds
	}
	return s.KubeconfigExpirationSeconds
}

// cloudProfile is the configured cloud profile of a Gardener provider type.
func (s Spec) cloudProfile(provider string) string {
	v := map[string]string{"aws": s.CloudProfileAWS, "gcp": s.CloudProfileGCP, "azure": s.CloudProfileAzure, "openstack": s.CloudProfileOpenStack}[provider]
	if v == "" {
		v = DefaultCloudProfiles[provider]
	}
	return v
}

// Backend manages Shoots in one Gardener project.
type Backend struct {
	spec      Spec
	namespace string
	dyn       dynamic.Interface
	log       logrus.FieldLogger
	now       func() time.Time

	// kubeconfigs are the admin kubeconfigs handed out last, by Shoot (namespace/name), reused
	// until they are due (infrastructure.KubeconfigDue).
	mu          sync.Mutex
	kubeconfigs map[string]infrastructure.Credentials
}

var (
	_ infrastructure.Backend           = (*Backend)(nil)
	_ infrastructure.KubeconfigRenewer = (*Backend)(nil)
)

// New connects to the Gardener cluster that spec's kubeconfig names.
func New(spec Spec, log logrus.FieldLogger) (*Backend, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	cfg, err := kubeconfig.Source{Inline: spec.Kubeconfig, Path: spec.KubeconfigPath}.RESTConfig()
	if err != nil {
		return nil, fmt.Errorf("spec: Gardener kubeconfig: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the Gardener client: %w", err)
	}
	return NewWithClient(spec, dyn, log)
}

// NewWithClient uses dyn to talk to Gardener (the spec's kubeconfig is not read).
func NewWithClient(spec Spec, dyn dynamic.Interface, log logrus.FieldLogger) (*Backend, error) {
	if spec.Project == "" {
		return nil, errors.New("spec.project is required")
	}
	if err := spec.validateOptions(); err != nil {
		return nil, err
	}
	if log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		log = l
	}
	ns := "garden-" + spec.Project
	return &Backend{spec: spec, namespace: ns, dyn: dyn, log: log.WithField("gardener_namespace", ns), now: time.Now,
		kubeconfigs: map[string]infrastructure.Credentials{}}, nil
}

// Factory builds the backend of a provisioner set entry.
func Factory(_ context.Context, e infrastructure.Entry, deps infrastructure.Deps) (infrastructure.Backend, error) {
	var spec Spec
	if err := infrastructure.DecodeSpec(e.Spec, &spec); err != nil {
		return nil, err
	}
	return New(spec, deps.Log)
}

// Namespace is the project namespace the Shoots live in.
func (b *Backend) Namespace() string { return b.namespace }

func (b *Backend) shoots() dynamic.ResourceInterface {
	return b.dyn.Resource(ShootGVR).Namespace(b.namespace)
}

func (b *Backend) logFor(spec infrastructure.Spec) logrus.FieldLogger {
	return b.log.WithFields(logrus.Fields{"runtime_id": spec.RuntimeID, "operation_id": spec.OperationID, "shoot": ShootName(spec)})
}

// Create submits the Shoot. A Shoot of the same name that belongs to the runtime (by its
// runtime-id annotation) is success; one that belongs to another runtime is an error.
func (b *Backend) Create(ctx context.Context, spec infrastructure.Spec) error {
	name := ShootName(spec)
	shoot, err := b.newShoot(spec)
	if err != nil {
		return fmt.Errorf("creating Shoot %s/%s for runtime %s: %w", b.namespace, name, spec.RuntimeID, err)
	}
	_, err = b.shoots().Create(ctx, shoot, metav1.CreateOptions{FieldManager: FieldManager})
	if apierrors.IsAlreadyExists(err) {
		_, err = b.get(ctx, spec)
		if err == nil {
			b.logFor(spec).Info("Shoot already exists")
		}
	} else if err == nil {
		b.logFor(spec).Info("Shoot created")
	}
	if err != nil {
		return fmt.Errorf("creating Shoot %s/%s for runtime %s: %w", b.namespace, name, spec.RuntimeID, err)
	}
	return nil
}

// get returns the runtime's Shoot: infrastructure.ErrNotFound when there is none, an error when
// the Shoot of that name belongs to another runtime.
func (b *Backend) get(ctx context.Context, spec infrastructure.Spec) (*unstructured.Unstructured, error) {
	s, err := b.shoots().Get(ctx, ShootName(spec), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("shoot %s/%s: %w", b.namespace, ShootName(spec), infrastructure.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if owner := s.GetAnnotations()[AnnotationRuntimeID]; owner != spec.RuntimeID {
		return nil, fmt.Errorf("shoot %s/%s belongs to runtime %q, not %s", b.namespace, s.GetName(), owner, spec.RuntimeID)
	}
	return s, nil
}

// Status reads the Shoot: its domain, the state of its last operation (only once Gardener has
// observed the current generation), the generation it reconciled, and hibernation.
func (b *Backend) Status(ctx context.Context, spec infrastructure.Spec) (infrastructure.Status, error) {
	s, err := b.get(ctx, spec)
	if err != nil {
		return infrastructure.Status{}, fmt.Errorf("getting the status of runtime %s: %w", spec.RuntimeID, err)
	}
	return shootStatus(s), nil
}

func shootStatus(s *unstructured.Unstructured) infrastructure.Status {
	st := infrastructure.Status{Phase: infrastructure.PhaseInProgress}
	st.Domain, _, _ = unstructured.NestedString(s.Object, "spec", "dns", "domain")
	st.Hibernated, _, _ = unstructured.NestedBool(s.Object, "status", "hibernated")
	observed, _, _ := unstructured.NestedInt64(s.Object, "status", "observedGeneration")
	state, _, _ := unstructured.NestedString(s.Object, "status", "lastOperation", "state")
	if state == "Succeeded" {
		st.ObservedRevision = observed
	}
	if observed != s.GetGeneration() {
		return st
	}
	switch state {
	case "Succeeded":
		st.Phase = infrastructure.PhaseSucceeded
	case "Failed", "Error", "Aborted":
		st.Phase = infrastructure.PhaseFailed
		st.Reason, _, _ = unstructured.NestedString(s.Object, "status", "lastOperation", "description")
		if st.Reason == "" {
			st.Reason = "Gardener reports the last operation " + state
		}
	}
	return st
}

// Kubeconfig returns an admin kubeconfig of the runtime (see KubeconfigCredentials).
func (b *Backend) Kubeconfig(ctx context.Context, spec infrastructure.Spec) (string, error) {
	c, err := b.KubeconfigCredentials(ctx, spec)
	return c.Kubeconfig, err
}

// AdminKubeconfigSubresource is the Shoot subresource that issues admin kubeconfigs.
const AdminKubeconfigSubresource = "adminkubeconfig"

// KubeconfigCredentials returns an admin kubeconfig of the runtime's Shoot and when it expires:
// the one handed out last while it is not due, else a new one from Gardener (POST
// shoots/{name}/adminkubeconfig with an AdminKubeconfigRequest for
// kubeconfig_expiration_seconds). Gardener may issue a shorter one than asked: its
// expirationTimestamp is what counts.
func (b *Backend) KubeconfigCredentials(ctx context.Context, spec infrastructure.Spec) (infrastructure.Credentials, error) {
	c, err := b.adminKubeconfig(ctx, spec)
	if err != nil {
		return infrastructure.Credentials{}, fmt.Errorf("getting the kubeconfig of runtime %s: %w", spec.RuntimeID, err)
	}
	return c, nil
}

func (b *Backend) adminKubeconfig(ctx context.Context, spec infrastructure.Spec) (infrastructure.Credentials, error) {
	s, err := b.get(ctx, spec)
	if err != nil {
		return infrastructure.Credentials{}, err
	}
	// Keyed by UID too: a Shoot deleted and created again under the same name has new credentials.
	key := b.namespace + "/" + s.GetName() + "/" + string(s.GetUID())
	now := b.now()
	b.mu.Lock()
	cached, ok := b.kubeconfigs[key]
	b.mu.Unlock()
	if ok && !infrastructure.KubeconfigDue(cached.Kubeconfig, now) && now.Before(cached.ExpiresAt) {
		return cached, nil
	}
	req := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "authentication.gardener.cloud/v1alpha1",
		"kind":       "AdminKubeconfigRequest",
		// The dynamic client puts the name into the path (shoots/{name}/adminkubeconfig).
		"metadata": map[string]any{"name": s.GetName(), "namespace": b.namespace},
		"spec":     map[string]any{"expirationSeconds": b.spec.expirationSeconds()},
	}}
	out, err := b.shoots().Create(ctx, req, metav1.CreateOptions{}, AdminKubeconfigSubresource)
	if err != nil {
		return infrastructure.Credentials{}, fmt.Errorf("requesting an admin kubeconfig of Shoot %s/%s: %w", b.namespace, s.GetName(), err)
	}
	enc, _, _ := unstructured.NestedString(out.Object, "status", "kubeconfig")
	if enc == "" {
		return infrastructure.Credentials{}, fmt.Errorf("the AdminKubeconfigRequest of Shoot %s/%s came back without a kubeconfig", b.namespace, s.GetName())
	}
	kc, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return infrastructure.Credentials{}, fmt.Errorf("decoding the admin kubeconfig of Shoot %s/%s: %w", b.namespace, s.GetName(), err)
	}
	exp, _, _ := unstructured.NestedString(out.Object, "status", "expirationTimestamp")
	expiresAt, err := time.Parse(time.RFC3339, exp)
	if err != nil {
		return infrastructure.Credentials{}, fmt.Errorf("the AdminKubeconfigRequest of Shoot %s/%s has no valid expirationTimestamp (%q): %w", b.namespace, s.GetName(), exp, err)
	}
	c := infrastructure.Credentials{Kubeconfig: string(kc), ExpiresAt: expiresAt}
	b.mu.Lock()
	b.kubeconfigs[key] = c
	b.mu.Unlock()
	b.logFor(spec).WithField("expires_at", expiresAt.UTC().Format(time.RFC3339)).Info("admin kubeconfig issued")
	return c, nil
}

// Update writes the set fields of spec.Cluster into the Shoot and returns its new generation,
// which Status reports as ObservedRevision once Gardener has reconciled it.
func (b *Backend) Update(ctx context.Context, spec infrastructure.Spec) (int64, error) {
	pc, err := parseProviderConfig(spec.Cluster.ProviderConfig)
	if err != nil {
		return 0, fmt.Errorf("updating runtime %s: %w", spec.RuntimeID, err)
	}
	var gen int64
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := b.get(ctx, spec)
		if err != nil {
			return err
		}
		if err := applyCluster(s, spec, pc); err != nil {
			return err
		}
		out, err := b.shoots().Update(ctx, s, metav1.UpdateOptions{FieldManager: FieldManager})
		if err != nil {
			return err
		}
		gen = out.GetGeneration()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("updating Shoot %s/%s of runtime %s: %w", b.namespace, ShootName(spec), spec.RuntimeID, err)
	}
	b.logFor(spec).WithField("generation", gen).Info("Shoot updated")
	return gen, nil
}

// Hibernate sets spec.hibernation.enabled.
func (b *Backend) Hibernate(ctx context.Context, spec infrastructure.Spec) error {
	err := b.patch(ctx, spec, []byte(`{"spec":{"hibernation":{"enabled":true}}}`))
	if err != nil {
		return fmt.Errorf("hibernating Shoot %s/%s of runtime %s: %w", b.namespace, ShootName(spec), spec.RuntimeID, err)
	}
	b.logFor(spec).Info("Shoot hibernation requested")
	return nil
}

// patch merge-patches the runtime's Shoot, guarded by its UID.
func (b *Backend) patch(ctx context.Context, spec infrastructure.Spec, patch []byte) error {
	s, err := b.get(ctx, spec)
	if err != nil {
		return err
	}
	// The UID precondition makes sure the Shoot checked above is the one patched.
	guarded, err := withUID(patch, s.GetUID())
	if err != nil {
		return err
	}
	_, err = b.shoots().Patch(ctx, s.GetName(), types.MergePatchType, guarded, metav1.PatchOptions{FieldManager: FieldManager})
	return err
}

// Delete confirms the deletion (annotation) and deletes the Shoot; a missing Shoot is fine.
func (b *Backend) Delete(ctx context.Context, spec infrastructure.Spec) error {
	err := b.delete(ctx, spec)
	if errors.Is(err, infrastructure.ErrNotFound) || apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting Shoot %s/%s of runtime %s: %w", b.namespace, ShootName(spec), spec.RuntimeID, err)
	}
	return nil
}

func (b *Backend) delete(ctx context.Context, spec infrastructure.Spec) error {
	s, err := b.get(ctx, spec)
	if err != nil {
		return err
	}
	if s.GetAnnotations()[AnnotationConfirmDeletion] != "true" {
		if err := b.patch(ctx, spec, []byte(`{"metadata":{"annotations":{"`+AnnotationConfirmDeletion+`":"true"}}}`)); err != nil {
			return fmt.Errorf("confirming the deletion: %w", err)
		}
	}
	uid := s.GetUID()
	if err := b.shoots().Delete(ctx, s.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
		return err
	}
	b.mu.Lock()
	delete(b.kubeconfigs, b.namespace+"/"+s.GetName()+"/"+string(uid))
	b.mu.Unlock()
	b.logFor(spec).Info("Shoot deletion requested")
	return nil
}

// Deleted is true once the Shoot is gone.
func (b *Backend) Deleted(ctx context.Context, spec infrastructure.Spec) (bool, error) {
	_, err := b.get(ctx, spec)
	switch {
	case errors.Is(err, infrastructure.ErrNotFound):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("checking whether runtime %s is deleted: %w", spec.RuntimeID, err)
	}
	return false, nil
}

// withUID adds metadata.uid to a merge patch: the API server rejects the patch if the object
// was replaced by another of the same name.
func withUID(patch []byte, uid types.UID) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, fmt.Errorf("decoding patch: %w", err)
	}
	md, _ := m["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		m["metadata"] = md
	}
	md["uid"] = string(uid)
	return json.Marshal(m)
}
