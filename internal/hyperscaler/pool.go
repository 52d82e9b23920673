// Package hyperscaler is the hyperscaler account pool: the Gardener bindings (SecretBindings or
// CredentialsBindings) holding cloud-provider credentials that runtimes are created with, and the
// rules that pick one for a tenant (Resolve_Target_Secret) and give it up when the tenant's last
// runtime is gone (Release_Subscription).
//
// Two pools implement Pool: Gardener, the real one (bindings in the Gardener project labelled
// hyperscalerType, claimed exclusively by a tenantName label), and List, a configured list of
// binding names per hyperscaler, for the simulated and other non-Gardener backends.
package hyperscaler

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
)

// Type is a hyperscaler: aws, azure, gcp or openstack.
type Type string

// Request says which account a runtime needs.
type Request struct {
	// Provider is the runtime's hyperscaler (aws, azure, gcp, openstack).
	Provider string
	// Region is the runtime's hyperscaler region; openstack pools are per region.
	Region string
	// PlatformRegion is the BTP region the instance was created in.
	PlatformRegion string
	// Tenant is the global account: the owner of an exclusive account.
	Tenant string
	// Shared: the plan runs on shared accounts (trial), picked by least use, never claimed.
	Shared bool
	// EUAccess: the platform region needs an account of the EU access pool.
	EUAccess bool
}

// Key is the hyperscalerType label value of the pool the request draws from: the provider,
// openstack_<region> for openstack with a region, gcp_cf-sa30 for Google Cloud in cf-sa30
// (testdata/gardener_account_pool.yaml).
func (r Request) Key() string {
	switch {
	case r.Provider == "openstack" && r.Region != "":
		return "openstack_" + r.Region
	case r.Provider == "gcp" && r.PlatformRegion == "cf-sa30":
		return "gcp_cf-sa30"
	}
	return r.Provider
}

func (r Request) String() string {
	kind := "exclusive"
	if r.Shared {
		kind = "shared"
	}
	eu := ""
	if r.EUAccess {
		eu = ", EU access"
	}
	return fmt.Sprintf("%s account of hyperscaler type %q%s for global account %q", kind, r.Key(), eu, r.Tenant)
}

// Rules turn an operation's plan and regions into a Request.
type Rules struct {
	// SharedPlans are the plan names whose runtimes use shared accounts.
	SharedPlans []string
	// EUAccessRegions are the platform regions whose runtimes use the EU access pool.
	EUAccessRegions []string
}

// DefaultRules are the original KEB's: trial on shared accounts, cf-eu11 and cf-ch20 on the EU
// access pool.
func DefaultRules() Rules {
	return Rules{SharedPlans: []string{"trial"}, EUAccessRegions: []string{"cf-eu11", "cf-ch20"}}
}

// Request is the account request of a runtime of plan (its name) in the regions, for tenant.
func (r Rules) Request(provider, plan, platformRegion, region, tenant string) Request {
	return Request{
		Provider: provider, Region: region, PlatformRegion: platformRegion, Tenant: tenant,
		Shared: contains(r.SharedPlans, plan), EUAccess: contains(r.EUAccessRegions, platformRegion),
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(strings.TrimSpace(v), s) {
			return true
		}
	}
	return false
}

// Pool hands out hyperscaler accounts.
type Pool interface {
	// Resolve returns the name of the binding the runtime's cluster is created with: the
	// tenant's own (claiming a free one the first time) or, for shared requests, the least
	// used shared one. ErrNoFreeBinding when the pool has none to give.
	Resolve(ctx context.Context, req Request) (string, error)
	// Release gives up tenant's binding once no cluster uses it: it is marked dirty for the
	// cleanup and never handed out again. Shared, internal, other tenants' and used bindings
	// are left alone; released tells whether it was marked now.
	Release(ctx context.Context, binding, tenant string) (released bool, err error)
	// Stateless tells that Resolve only computes from the request (no reads, no writes), and
	// Release does nothing.
	Stateless() bool
}

// ErrNoSecret means the pool holds no secret for the hyperscaler.
var ErrNoSecret = errors.New("no hyperscaler account secret")

// ErrNoFreeBinding means the Gardener pool has no binding to give: no unassigned one for a new
// tenant, or no shared one. Provisioning retries it (an operator may add bindings).
var ErrNoFreeBinding = errors.New("no free hyperscaler account in the pool")

// List holds the binding names per hyperscaler type. The zero value is an empty pool.
type List struct {
	secrets map[Type][]string
}

var _ Pool = List{}

// ParsePool reads "aws:secret-a,secret-b;azure:secret-c": hyperscaler types separated by
// semicolons, each with its secrets.
func ParsePool(spec string) (List, error) {
	p := List{secrets: map[Type][]string{}}
	for _, group := range strings.Split(spec, ";") {
		group = strings.TrimSpace(group)
		if group == "" {
			continue
		}
		typ, list, ok := strings.Cut(group, ":")
		typ = strings.TrimSpace(typ)
		if !ok || typ == "" {
			return List{}, fmt.Errorf("account pool entry %q: want <hyperscaler>:<secret>[,<secret>...]", group)
		}
		seen := map[string]bool{}
		for _, s := range strings.Split(list, ",") {
			if s = strings.TrimSpace(s); s == "" || seen[s] {
				continue
			}
			seen[s] = true
			p.secrets[Type(typ)] = append(p.secrets[Type(typ)], s)
		}
		if len(p.secrets[Type(typ)]) == 0 {
			return List{}, fmt.Errorf("account pool entry %q has no secrets", group)
		}
	}
	return p, nil
}

// Resolve picks the secret for a tenant's runtime by its provider. The choice is a rendezvous
// hash of tenant and secret names: the same tenant always gets the same account (what Gardener
// and the tenant's other runtimes already use), tenants spread evenly, and adding a secret moves
// only the tenants it wins. It keeps no state, so every broker replica picks the same secret.
// The list has no notion of exclusive or shared accounts: tenants share its secrets.
func (p List) Resolve(_ context.Context, req Request) (string, error) {
	return p.resolve(Type(req.Provider), req.Tenant)
}

func (p List) resolve(typ Type, tenant string) (string, error) {
	secrets := p.secrets[typ]
	if len(secrets) == 0 {
		// A configuration problem: retrying does not help.
		return "", clientkit.Permanent(fmt.Errorf("%w for hyperscaler %q (configure APP_HYPERSCALER_ACCOUNT_POOL)", ErrNoSecret, typ))
	}
	return rendezvous(tenant, secrets)[0], nil
}

// Release does nothing: the list's secrets are never assigned.
func (List) Release(context.Context, string, string) (bool, error) { return false, nil }

// Stateless is true.
func (List) Stateless() bool { return true }

// Types lists the hyperscalers with secrets, sorted.
func (p List) Types() []Type {
	out := make([]Type, 0, len(p.secrets))
	for t := range p.secrets {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// rendezvous orders names by their rendezvous-hash score for key, best first (ties by name).
func rendezvous(key string, names []string) []string {
	type scored struct {
		name  string
		score uint64
	}
	s := make([]scored, len(names))
	for i, n := range names {
		h := fnv.New64a()
		_, _ = h.Write([]byte(key + "\x00" + n))
		s[i] = scored{n, mix(h.Sum64())}
	}
	sort.Slice(s, func(i, j int) bool {
		if s[i].score != s[j].score {
			return s[i].score > s[j].score
		}
		return s[i].name < s[j].name
	})
	out := make([]string, len(s))
	for i := range s {
		out[i] = s[i].name
	}
	return out
}

// mix is splitmix64's finalizer: FNV alone barely changes its high bits for names that differ in
// one trailing character, which would pile tenants onto one secret.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
