package hyperscaler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
)

// project is a Gardener project namespace on the test API server with a pool of kind.
type project struct {
	t    *testing.T
	dyn  dynamic.Interface
	ns   string
	kind BindingKind
	pool *Gardener
}

func newProject(t *testing.T, kind BindingKind) *project {
	t.Helper()
	p := &project{t: t, dyn: kubetest.Dynamic(t), ns: kubetest.Namespace(t), kind: kind}
	p.pool = p.replica()
	return p
}

// replica is another broker replica's pool: its own client and connections.
func (p *project) replica() *Gardener {
	p.t.Helper()
	g, err := NewGardener(kubetest.Dynamic(p.t), p.ns, p.kind, nil)
	require.NoError(p.t, err)
	return g
}

func bothKinds(t *testing.T, f func(t *testing.T, kind BindingKind)) {
	for _, k := range []BindingKind{SecretBinding, CredentialsBinding} {
		t.Run(string(k), func(t *testing.T) { f(t, k) })
	}
}

// binding creates a binding of the project's kind with the labels, as an operator adds it.
func (p *project) binding(name string, labels map[string]string) {
	p.t.Helper()
	obj := map[string]any{"metadata": map[string]any{"name": name, "namespace": p.ns}, "provider": map[string]any{"type": labels[LabelHyperscalerType]}}
	if p.kind == CredentialsBinding {
		obj["apiVersion"], obj["kind"] = "security.gardener.cloud/v1alpha1", "CredentialsBinding"
		obj["credentialsRef"] = map[string]any{"apiVersion": "v1", "kind": "Secret", "name": name + "-secret", "namespace": p.ns}
	} else {
		obj["apiVersion"], obj["kind"] = "core.gardener.cloud/v1beta1", "SecretBinding"
		obj["secretRef"] = map[string]any{"name": name + "-secret", "namespace": p.ns}
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetLabels(labels)
	_, err := p.dyn.Resource(p.kind.Resource()).Namespace(p.ns).Create(context.Background(), u, metav1.CreateOptions{})
	require.NoError(p.t, err)
}

func (p *project) labels(name string) map[string]string {
	p.t.Helper()
	b, err := p.dyn.Resource(p.kind.Resource()).Namespace(p.ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(p.t, err)
	return b.GetLabels()
}

// shoot creates a Shoot naming the binding the way Gardener's API does for the kind.
func (p *project) shoot(name, binding string) {
	p.t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
		"metadata": map[string]any{"name": name, "namespace": p.ns},
		"spec":     map[string]any{p.kind.ShootField(): binding, "region": "eu-central-1"},
	}}
	_, err := p.dyn.Resource(ShootGVR).Namespace(p.ns).Create(context.Background(), u, metav1.CreateOptions{})
	require.NoError(p.t, err)
}

func (p *project) deleteShoot(name string) {
	p.t.Helper()
	require.NoError(p.t, p.dyn.Resource(ShootGVR).Namespace(p.ns).Delete(context.Background(), name, metav1.DeleteOptions{}))
}

func exclusive(provider, tenant string) Request { return Request{Provider: provider, Tenant: tenant} }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestClaimIsExclusivePerTenantAndKept(t *testing.T) {
	bothKinds(t, func(t *testing.T, kind BindingKind) {
		p := newProject(t, kind)
		p.binding("aws-1", map[string]string{LabelHyperscalerType: "aws"})
		p.binding("aws-2", map[string]string{LabelHyperscalerType: "aws"})
		p.binding("gcp-1", map[string]string{LabelHyperscalerType: "gcp"})

		a, err := p.pool.Resolve(ctx(t), exclusive("aws", "ga-a"))
		require.NoError(t, err)
		assert.Contains(t, []string{"aws-1", "aws-2"}, a)
		assert.Equal(t, "ga-a", p.labels(a)[LabelTenantName], "claimed by the tenant's label")

		again, err := p.replica().Resolve(ctx(t), exclusive("aws", "ga-a"))
		require.NoError(t, err)
		assert.Equal(t, a, again, "the same tenant gets its binding again, on any replica")

		b, err := p.pool.Resolve(ctx(t), exclusive("aws", "ga-b"))
		require.NoError(t, err)
		assert.NotEqual(t, a, b, "another tenant gets another account")
		assert.Equal(t, "ga-b", p.labels(b)[LabelTenantName])
		assert.Equal(t, "ga-a", p.labels(a)[LabelTenantName], "the first claim is untouched")

		g, err := p.pool.Resolve(ctx(t), exclusive("gcp", "ga-a"))
		require.NoError(t, err)
		assert.Equal(t, "gcp-1", g, "one account per hyperscaler type")

		_, err = p.pool.Resolve(ctx(t), exclusive("aws", "ga-c"))
		require.ErrorIs(t, err, ErrNoFreeBinding)
		assert.True(t, clientkit.Retryable(err), "an empty pool is retried: an operator may add accounts")
		assert.Contains(t, err.Error(), "hyperscalerType=aws")
		assert.Contains(t, err.Error(), p.ns)

		p.binding("aws-3", map[string]string{LabelHyperscalerType: "aws"})
		c, err := p.pool.Resolve(ctx(t), exclusive("aws", "ga-c"))
		require.NoError(t, err)
		assert.Equal(t, "aws-3", c, "a binding added later is claimed")
	})
}

func TestEUAccessRequestsUseTheEUPoolOnly(t *testing.T) {
	p := newProject(t, SecretBinding)
	p.binding("aws-eu", map[string]string{LabelHyperscalerType: "aws", LabelEUAccess: "true"})
	p.binding("aws-std", map[string]string{LabelHyperscalerType: "aws"})
	p.binding("aws-shared-eu", map[string]string{LabelHyperscalerType: "aws", LabelEUAccess: "true", LabelShared: "true"})
	p.binding("aws-shared", map[string]string{LabelHyperscalerType: "aws", LabelShared: "true"})
	rules := DefaultRules()

	eu := rules.Request("aws", "aws", "cf-eu11", "eu-central-1", "ga-eu")
	require.True(t, eu.EUAccess)
	got, err := p.pool.Resolve(ctx(t), eu)
	require.NoError(t, err)
	assert.Equal(t, "aws-eu", got)

	got, err = p.pool.Resolve(ctx(t), rules.Request("aws", "aws", "cf-eu10", "eu-central-1", "ga-std"))
	require.NoError(t, err)
	assert.Equal(t, "aws-std", got, "an account without euAccess outside the EU access regions")

	_, err = p.pool.Resolve(ctx(t), rules.Request("aws", "aws", "cf-eu11", "eu-central-1", "ga-eu-2"))
	require.ErrorIs(t, err, ErrNoFreeBinding, "the EU pool is empty now; the standard one is not used instead")

	got, err = p.pool.Resolve(ctx(t), rules.Request("aws", "trial", "cf-eu11", "eu-central-1", "ga-trial"))
	require.NoError(t, err)
	assert.Equal(t, "aws-shared-eu", got)
	got, err = p.pool.Resolve(ctx(t), rules.Request("aws", "trial", "cf-us10", "us-east-1", "ga-trial"))
	require.NoError(t, err)
	assert.Equal(t, "aws-shared", got)
}

func TestSharedPlansUseTheLeastUsedSharedBinding(t *testing.T) {
	bothKinds(t, func(t *testing.T, kind BindingKind) {
		p := newProject(t, kind)
		p.binding("azure-x", map[string]string{LabelHyperscalerType: "azure"})
		for _, n := range []string{"azure-s1", "azure-s2", "azure-s3"} {
			p.binding(n, map[string]string{LabelHyperscalerType: "azure", LabelShared: "true"})
		}
		trial := DefaultRules().Request("azure", "trial", "cf-eu10", "westeurope", "ga-1")
		require.True(t, trial.Shared)

		got, err := p.pool.Resolve(ctx(t), trial)
		require.NoError(t, err)
		assert.Equal(t, "azure-s1", got, "no Shoots: the first")

		p.shoot("c-1", "azure-s1")
		p.shoot("c-2", "azure-s1")
		p.shoot("c-3", "azure-s2")
		p.shoot("c-4", "azure-x")
		got, err = p.pool.Resolve(ctx(t), trial)
		require.NoError(t, err)
		assert.Equal(t, "azure-s3", got, "the one no Shoot uses")

		p.shoot("c-5", "azure-s3")
		p.shoot("c-6", "azure-s3")
		got, err = p.replica().Resolve(ctx(t), DefaultRules().Request("azure", "trial", "cf-eu10", "westeurope", "ga-2"))
		require.NoError(t, err)
		assert.Equal(t, "azure-s2", got, "least used: s1 and s3 have two Shoots, s2 one")

		for _, n := range []string{"azure-s1", "azure-s2", "azure-s3"} {
			assert.NotContains(t, p.labels(n), LabelTenantName, "shared bindings are never claimed")
		}
		assert.NotContains(t, p.labels("azure-x"), LabelTenantName, "a shared request never takes an exclusive account")

		_, err = p.pool.Resolve(ctx(t), DefaultRules().Request("gcp", "trial", "cf-eu10", "europe-west3", "ga-1"))
		require.ErrorIs(t, err, ErrNoFreeBinding)
		assert.Contains(t, err.Error(), "shared=true")
	})
}

func TestReleaseMarksDirtyWhenTheLastShootIsGoneAndDirtyIsNeverHandedOut(t *testing.T) {
	bothKinds(t, func(t *testing.T, kind BindingKind) {
		p := newProject(t, kind)
		p.binding("gcp-1", map[string]string{LabelHyperscalerType: "gcp"})
		p.binding("gcp-shared", map[string]string{LabelHyperscalerType: "gcp", LabelShared: "true"})
		p.binding("gcp-internal", map[string]string{LabelHyperscalerType: "gcp", LabelInternal: "true", LabelTenantName: "ga-int"})

		mine, err := p.pool.Resolve(ctx(t), exclusive("gcp", "ga-1"))
		require.NoError(t, err)
		require.Equal(t, "gcp-1", mine)
		p.shoot("c-1", mine)
		p.shoot("c-2", mine)

		released, err := p.pool.Release(ctx(t), mine, "ga-1")
		require.NoError(t, err)
		assert.False(t, released, "two runtimes still use it")
		p.deleteShoot("c-1")
		released, err = p.pool.Release(ctx(t), mine, "ga-1")
		require.NoError(t, err)
		assert.False(t, released, "one runtime still uses it")
		assert.NotContains(t, p.labels(mine), LabelDirty)

		released, err = p.pool.Release(ctx(t), mine, "ga-other")
		require.NoError(t, err)
		assert.False(t, released, "not the tenant's")

		p.deleteShoot("c-2")
		released, err = p.replica().Release(ctx(t), mine, "ga-1")
		require.NoError(t, err)
		assert.True(t, released, "the last runtime is gone")
		l := p.labels(mine)
		assert.Equal(t, "true", l[LabelDirty])
		assert.Equal(t, "ga-1", l[LabelTenantName], "the tenant stays for the cleanup")

		released, err = p.pool.Release(ctx(t), mine, "ga-1")
		require.NoError(t, err)
		assert.False(t, released, "already dirty")

		_, err = p.pool.Resolve(ctx(t), exclusive("gcp", "ga-2"))
		require.ErrorIs(t, err, ErrNoFreeBinding, "a dirty binding is never handed to another tenant")
		_, err = p.pool.Resolve(ctx(t), exclusive("gcp", "ga-1"))
		require.ErrorIs(t, err, ErrNoFreeBinding, "nor to its tenant again: it gets a fresh one")
		p.binding("gcp-2", map[string]string{LabelHyperscalerType: "gcp"})
		fresh, err := p.pool.Resolve(ctx(t), exclusive("gcp", "ga-1"))
		require.NoError(t, err)
		assert.Equal(t, "gcp-2", fresh)

		for _, n := range []string{"gcp-shared", "gcp-internal"} {
			tenant := p.labels(n)[LabelTenantName]
			released, err = p.pool.Release(ctx(t), n, tenant)
			require.NoError(t, err)
			assert.False(t, released, n)
			assert.NotContains(t, p.labels(n), LabelDirty, n)
		}
		released, err = p.pool.Release(ctx(t), "no-such-binding", "ga-1")
		require.NoError(t, err)
		assert.False(t, released)
	})
}

// Many workers on two replicas (separate clients) claim for different tenants at once, each
// tenant on both replicas: no binding ever gets two tenants, each tenant ends with one binding
// that both its claims returned, and the tenants beyond the pool's size get ErrNoFreeBinding.
func TestConcurrentClaimsNeverGiveABindingToTwoTenants(t *testing.T) {
	bothKinds(t, func(t *testing.T, kind BindingKind) {
		p := newProject(t, kind)
		const bindings, tenants = 20, 26
		for i := 0; i < bindings; i++ {
			p.binding(fmt.Sprintf("aws-%02d", i), map[string]string{LabelHyperscalerType: "aws"})
		}
		replicas := []*Gardener{p.pool, p.replica()}
		type result struct {
			name string
			err  error
		}
		results := make([][2]result, tenants)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := 0; i < tenants; i++ {
			for r := range replicas {
				wg.Add(1)
				go func(i, r int) {
					defer wg.Done()
					<-start
					name, err := replicas[r].Resolve(ctx(t), exclusive("aws", fmt.Sprintf("ga-%02d", i)))
					results[i][r] = result{name, err}
				}(i, r)
			}
		}
		close(start)
		wg.Wait()

		owner := map[string]string{}
		served := 0
		for i, rs := range results {
			tenant := fmt.Sprintf("ga-%02d", i)
			for _, r := range rs {
				if r.err != nil {
					require.ErrorIs(t, r.err, ErrNoFreeBinding, tenant)
					continue
				}
				if prev, ok := owner[r.name]; ok {
					require.Equal(t, tenant, prev, "binding %s given to two tenants", r.name)
				}
				owner[r.name] = tenant
			}
			if rs[0].err == nil && rs[1].err == nil {
				assert.Equal(t, rs[0].name, rs[1].name, "tenant %s got two bindings", tenant)
			}
			if rs[0].err == nil || rs[1].err == nil {
				served++
			}
		}
		assert.Equal(t, bindings, served, "every binding serves one tenant; the rest found none free")

		list, err := p.dyn.Resource(kind.Resource()).Namespace(p.ns).List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		claimedBy := map[string]int{}
		for _, b := range list.Items {
			tenant := b.GetLabels()[LabelTenantName]
			require.NotEmpty(t, tenant, "binding %s left unclaimed while tenants went without", b.GetName())
			assert.Equal(t, owner[b.GetName()], tenant, "the label says who got %s", b.GetName())
			claimedBy[tenant]++
		}
		for tenant, n := range claimedBy {
			assert.Equal(t, 1, n, "tenant %s holds %d bindings", tenant, n)
		}
	})
}

func TestRequestsThatCannotBeLabelValuesAreRefused(t *testing.T) {
	p := newProject(t, SecretBinding)
	_, err := p.pool.Resolve(ctx(t), exclusive("aws", "not a label value!"))
	require.Error(t, err)
	assert.False(t, clientkit.Retryable(err))
	_, err = p.pool.Resolve(ctx(t), exclusive("", "ga"))
	require.Error(t, err)
	assert.False(t, clientkit.Retryable(err))
}
