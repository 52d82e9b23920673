package hyperscaler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
)

// Labels of the pool's bindings (testdata/gardener_account_pool.yaml).
const (
	LabelHyperscalerType = "hyperscalerType"
	LabelTenantName      = "tenantName"
	LabelShared          = "shared"
	LabelEUAccess        = "euAccess"
	LabelDirty           = "dirty"
	LabelInternal        = "internal"
)

// BindingKind is the Gardener resource the pool's accounts are: SecretBinding (Shoot
// spec.secretBindingName) or, on newer Gardener, CredentialsBinding (spec.credentialsBindingName).
type BindingKind string

const (
	SecretBinding      BindingKind = "SecretBinding"
	CredentialsBinding BindingKind = "CredentialsBinding"
)

// Resources of the bindings and Shoots.
var (
	SecretBindingGVR      = schema.GroupVersionResource{Group: "core.gardener.cloud", Version: "v1beta1", Resource: "secretbindings"}
	CredentialsBindingGVR = schema.GroupVersionResource{Group: "security.gardener.cloud", Version: "v1alpha1", Resource: "credentialsbindings"}
	ShootGVR              = schema.GroupVersionResource{Group: "core.gardener.cloud", Version: "v1beta1", Resource: "shoots"}
)

// ParseBindingKind reads SecretBinding or CredentialsBinding (any case).
func ParseBindingKind(s string) (BindingKind, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "secretbinding":
		return SecretBinding, nil
	case "credentialsbinding":
		return CredentialsBinding, nil
	}
	return "", fmt.Errorf("binding kind %q: want SecretBinding or CredentialsBinding", s)
}

// Resource is the kind's resource.
func (k BindingKind) Resource() schema.GroupVersionResource {
	if k == CredentialsBinding {
		return CredentialsBindingGVR
	}
	return SecretBindingGVR
}

// ShootField is the Shoot spec field naming a binding of this kind.
func (k BindingKind) ShootField() string {
	if k == CredentialsBinding {
		return "credentialsBindingName"
	}
	return "secretBindingName"
}

// Gardener is the account pool of a Gardener project: its bindings labelled hyperscalerType.
// A tenant claims an unassigned binding by labelling it tenantName, with an update guarded by
// the binding's resourceVersion: of two claims of one binding (two workers, two broker replicas)
// the API server accepts one and refuses the other with a conflict, so no binding ever gets two
// tenants.
type Gardener struct {
	dyn       dynamic.Interface
	namespace string
	kind      BindingKind
	log       logrus.FieldLogger
}

var _ Pool = (*Gardener)(nil)

// claimAttempts bounds one Resolve's claims lost to other tenants (conflicts) or undone for
// another claim of the same tenant; then it gives up with a temporary error and the step retries.
const claimAttempts = 64

// NewGardener is the pool of the bindings of kind in namespace (garden-<project>).
func NewGardener(dyn dynamic.Interface, namespace string, kind BindingKind, log logrus.FieldLogger) (*Gardener, error) {
	if namespace == "" {
		return nil, errors.New("account pool: the Gardener namespace is required")
	}
	if kind != SecretBinding && kind != CredentialsBinding {
		return nil, fmt.Errorf("account pool: binding kind %q: want SecretBinding or CredentialsBinding", kind)
	}
	if log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		log = l
	}
	return &Gardener{dyn: dyn, namespace: namespace, kind: kind, log: log.WithFields(logrus.Fields{"gardener_namespace": namespace, "binding_kind": kind})}, nil
}

// Namespace is the Gardener project namespace of the bindings.
func (g *Gardener) Namespace() string { return g.namespace }

// Kind is the bindings' resource kind.
func (g *Gardener) Kind() BindingKind { return g.kind }

// Stateless is false: the pool lives in Gardener.
func (*Gardener) Stateless() bool { return false }

func (g *Gardener) bindings() dynamic.ResourceInterface {
	return g.dyn.Resource(g.kind.Resource()).Namespace(g.namespace)
}

// Selector is the label selector of the bindings req may use, with the extra requirements:
// its hyperscaler type; euAccess=true or no euAccess label; shared=true, or for exclusive
// accounts shared!=true and no dirty label.
func Selector(req Request, extra ...string) string {
	parts := []string{LabelHyperscalerType + "=" + req.Key()}
	if req.EUAccess {
		parts = append(parts, LabelEUAccess+"=true")
	} else {
		parts = append(parts, "!"+LabelEUAccess)
	}
	if req.Shared {
		parts = append(parts, LabelShared+"=true")
	} else {
		parts = append(parts, LabelShared+"!=true", "!"+LabelDirty)
	}
	return strings.Join(append(parts, extra...), ",")
}

// Resolve returns the tenant's binding, claiming a free one the first time; for shared requests
// the least used shared binding.
func (g *Gardener) Resolve(ctx context.Context, req Request) (string, error) {
	if err := checkRequest(req); err != nil {
		return "", err
	}
	if req.Shared {
		return g.leastUsed(ctx, req)
	}
	own := Selector(req, LabelTenantName+"="+req.Tenant)
	free := Selector(req, "!"+LabelTenantName)
	// Most requests are of tenants that have their binding: one read.
	mine, err := g.list(ctx, own)
	if err != nil {
		return "", err
	}
	if len(mine) > 0 {
		return mine[0].GetName(), nil
	}
	for attempt := 0; attempt < claimAttempts; attempt++ {
		// The free bindings are read before the tenant's own: a claim of the same tenant that
		// lands in between shows in the second read; one that lands after it is on the binding
		// this claim tries too (see claim), and conflicts with it.
		candidates, err := g.list(ctx, free)
		if err != nil {
			return "", err
		}
		if mine, err = g.list(ctx, own); err != nil {
			return "", err
		}
		if len(mine) > 0 {
			return mine[0].GetName(), nil
		}
		if len(candidates) == 0 {
			return "", fmt.Errorf("%w: no unassigned %s in %s matches %q (add one labelled %s=%s)",
				ErrNoFreeBinding, g.kind, g.namespace, free, LabelHyperscalerType, req.Key())
		}
		claimed, err := g.claim(ctx, candidates, req.Tenant)
		if apierrors.IsConflict(err) {
			continue // another claim changed it first: look again
		}
		if err != nil {
			return "", err
		}
		g.log.WithFields(logrus.Fields{"binding": claimed, "tenant": req.Tenant, "hyperscaler_type": req.Key()}).Info("hyperscaler account claimed")
		return claimed, nil
	}
	return "", fmt.Errorf("claiming a %s: still contended after %d attempts", req, claimAttempts)
}

// claim labels the first candidate in the tenant's rendezvous order with the tenant, guarded by
// the resourceVersion it was listed with. Different tenants claiming at once mostly try different
// bindings; claims of the same tenant (its subaccounts provisioning on two replicas) try the same
// one, as the order is the tenant's, so one wins and the other, conflicting, finds it as the
// tenant's next round. Only a binding added to the pool during such a race can leave the tenant
// with two (both its own; lookups then return the first by name).
func (g *Gardener) claim(ctx context.Context, candidates []unstructured.Unstructured, tenant string) (string, error) {
	byName := make(map[string]*unstructured.Unstructured, len(candidates))
	names := make([]string, len(candidates))
	for i := range candidates {
		names[i] = candidates[i].GetName()
		byName[names[i]] = &candidates[i]
	}
	b := byName[rendezvous(tenant, names)[0]].DeepCopy()
	labels := b.GetLabels()
	labels[LabelTenantName] = tenant
	b.SetLabels(labels)
	if _, err := g.bindings().Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return "", err
		}
		return "", g.apiError(fmt.Sprintf("claiming %s %s/%s for %q", g.kind, g.namespace, b.GetName(), tenant), err)
	}
	return b.GetName(), nil
}

// leastUsed picks the shared binding the fewest Shoots use (ties: the first by name).
func (g *Gardener) leastUsed(ctx context.Context, req Request) (string, error) {
	sel := Selector(req)
	shared, err := g.list(ctx, sel)
	if err != nil {
		return "", err
	}
	if len(shared) == 0 {
		return "", fmt.Errorf("%w: no shared %s in %s matches %q", ErrNoFreeBinding, g.kind, g.namespace, sel)
	}
	use, err := g.usage(ctx)
	if err != nil {
		return "", err
	}
	best := shared[0].GetName()
	for _, b := range shared[1:] {
		if use[b.GetName()] < use[best] {
			best = b.GetName()
		}
	}
	return best, nil
}

// usage counts the Shoots of the project per binding they name.
func (g *Gardener) usage(ctx context.Context) (map[string]int, error) {
	use := map[string]int{}
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := g.dyn.Resource(ShootGVR).Namespace(g.namespace).List(ctx, opts)
		if err != nil {
			return nil, g.apiError("listing the Shoots of "+g.namespace, err)
		}
		for _, s := range list.Items {
			if name, _, _ := unstructured.NestedString(s.Object, "spec", g.kind.ShootField()); name != "" {
				use[name]++
			}
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return use, nil
		}
	}
}

// Release marks tenant's binding dirty once no Shoot names it.
func (g *Gardener) Release(ctx context.Context, name, tenant string) (bool, error) {
	log := g.log.WithFields(logrus.Fields{"binding": name, "tenant": tenant})
	released := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		released = false
		b, err := g.bindings().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		labels := b.GetLabels()
		switch {
		case labels[LabelShared] == "true", labels[LabelInternal] == "true":
			log.Info("hyperscaler account is shared or internal: kept")
			return nil
		case labels[LabelDirty] == "true":
			return nil
		case labels[LabelTenantName] != tenant:
			log.WithField("owner", labels[LabelTenantName]).Info("hyperscaler account is not the tenant's: kept")
			return nil
		}
		use, err := g.usage(ctx)
		if err != nil {
			return err
		}
		if use[name] > 0 {
			log.WithField("shoots", use[name]).Info("hyperscaler account still used: kept")
			return nil
		}
		labels[LabelDirty] = "true"
		b.SetLabels(labels)
		if _, err := g.bindings().Update(ctx, b, metav1.UpdateOptions{}); err != nil {
			return err // a conflict reads it again
		}
		released = true
		return nil
	})
	if apierrors.IsNotFound(err) {
		log.Info("hyperscaler account binding is gone")
		return false, nil
	}
	if err != nil {
		return false, g.apiError(fmt.Sprintf("releasing %s %s/%s of %q", g.kind, g.namespace, name, tenant), err)
	}
	if released {
		log.Info("hyperscaler account released: marked dirty")
	}
	return released, nil
}

// list returns the bindings matching the selector, sorted by name.
func (g *Gardener) list(ctx context.Context, selector string) ([]unstructured.Unstructured, error) {
	var out []unstructured.Unstructured
	opts := metav1.ListOptions{LabelSelector: selector, Limit: 500}
	for {
		l, err := g.bindings().List(ctx, opts)
		if err != nil {
			return nil, g.apiError(fmt.Sprintf("listing %ss in %s with %q", g.kind, g.namespace, selector), err)
		}
		out = append(out, l.Items...)
		if opts.Continue = l.GetContinue(); opts.Continue == "" {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, nil
}

// apiError wraps a Gardener API error; answers that waiting will not change (forbidden, invalid,
// a missing resource type) are permanent.
func (g *Gardener) apiError(what string, err error) error {
	err = fmt.Errorf("%s: %w", what, err)
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err) {
		return clientkit.Permanent(err)
	}
	return err
}

// checkRequest refuses requests whose values cannot be label values: no retry mends them.
func checkRequest(req Request) error {
	if req.Provider == "" {
		return clientkit.Permanent(errors.New("account pool: the runtime has no provider"))
	}
	if errs := validation.IsValidLabelValue(req.Key()); len(errs) > 0 {
		return clientkit.Permanent(fmt.Errorf("account pool: hyperscaler type %q is no valid label value: %s", req.Key(), strings.Join(errs, "; ")))
	}
	if req.Shared {
		return nil // shared accounts are not claimed: the tenant is no label
	}
	if errs := validation.IsValidLabelValue(req.Tenant); len(errs) > 0 || req.Tenant == "" {
		return clientkit.Permanent(fmt.Errorf("account pool: global account %q is no valid label value: %s", req.Tenant, strings.Join(errs, "; ")))
	}
	return nil
}
