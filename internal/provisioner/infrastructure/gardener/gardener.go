// Package gardener is the backend that creates runtimes as Gardener Shoots
// (core.gardener.cloud/v1beta1) in the project namespace garden-<project>, through client-go's
// dynamic client (no Gardener Go dependency).
//
// Spec:
//
//	{"project": "kyma-dev", "kubeconfig_path": "/gardener/kubeconfig" | "kubeconfig": "...",
//	 "audit_logs_policy_config_map": "audit-policy", "audit_logs_tenant": "..."}
//
// Gardener does the work; this backend writes the Shoot and reads its status:
// spec.dns.domain, status.lastOperation and status.observedGeneration (the revision of Update),
// status.hibernated. The admin kubeconfig comes from the Secret <shoot>.kubeconfig.
package gardener

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"

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

var (
	ShootGVR  = schema.GroupVersionResource{Group: "core.gardener.cloud", Version: "v1beta1", Resource: "shoots"}
	secretGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// Spec configures the backend.
type Spec struct {
	Project                  string `json:"project"`
	KubeconfigPath           string `json:"kubeconfig_path"`
	Kubeconfig               string `json:"kubeconfig"`
	AuditLogsPolicyConfigMap string `json:"audit_logs_policy_config_map"`
	AuditLogsTenant          string `json:"audit_logs_tenant"`
}

// Validate checks the spec.
func (s Spec) Validate() error {
	if s.Project == "" {
		return errors.New("spec.project is required")
	}
	return kubeconfig.Source{Inline: s.Kubeconfig, Path: s.KubeconfigPath}.Validate("spec")
}

// Backend manages Shoots in one Gardener project.
type Backend struct {
	spec      Spec
	namespace string
	dyn       dynamic.Interface
	log       logrus.FieldLogger
}

var _ infrastructure.Backend = (*Backend)(nil)

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
	if log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		log = l
	}
	ns := "garden-" + spec.Project
	return &Backend{spec: spec, namespace: ns, dyn: dyn, log: log.WithField("gardener_namespace", ns)}, nil
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

// Kubeconfig reads the Secret <shoot>.kubeconfig in the project namespace.
func (b *Backend) Kubeconfig(ctx context.Context, spec infrastructure.Spec) (string, error) {
	kc, err := b.kubeconfig(ctx, spec)
	if err != nil {
		return "", fmt.Errorf("getting the kubeconfig of runtime %s: %w", spec.RuntimeID, err)
	}
	return kc, nil
}

func (b *Backend) kubeconfig(ctx context.Context, spec infrastructure.Spec) (string, error) {
	if _, err := b.get(ctx, spec); err != nil {
		return "", err
	}
	name := ShootName(spec) + ".kubeconfig"
	sec, err := b.dyn.Resource(secretGVR).Namespace(b.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("secret %s/%s does not exist yet", b.namespace, name)
	}
	if err != nil {
		return "", fmt.Errorf("reading Secret %s/%s: %w", b.namespace, name, err)
	}
	enc, _, _ := unstructured.NestedString(sec.Object, "data", "kubeconfig")
	if enc == "" {
		return "", fmt.Errorf("secret %s/%s has no kubeconfig", b.namespace, name)
	}
	kc, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", fmt.Errorf("decoding Secret %s/%s: %w", b.namespace, name, err)
	}
	return string(kc), nil
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
