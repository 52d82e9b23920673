// Package hyperscaler is the hyperscaler account pool: the Gardener secrets holding cloud-provider
// credentials that runtimes are created with, grouped by hyperscaler type, and the rule that picks
// one for a tenant (Resolve_Target_Secret).
package hyperscaler

import (
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
)

// Type is a hyperscaler: aws, azure, gcp or openstack.
type Type string

// Pool holds the secret names per hyperscaler type. The zero value is an empty pool.
type Pool struct {
	secrets map[Type][]string
}

// ParsePool reads "aws:secret-a,secret-b;azure:secret-c": hyperscaler types separated by
// semicolons, each with its secrets.
func ParsePool(spec string) (Pool, error) {
	p := Pool{secrets: map[Type][]string{}}
	for _, group := range strings.Split(spec, ";") {
		group = strings.TrimSpace(group)
		if group == "" {
			continue
		}
		typ, list, ok := strings.Cut(group, ":")
		typ = strings.TrimSpace(typ)
		if !ok || typ == "" {
			return Pool{}, fmt.Errorf("account pool entry %q: want <hyperscaler>:<secret>[,<secret>...]", group)
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
			return Pool{}, fmt.Errorf("account pool entry %q has no secrets", group)
		}
	}
	return p, nil
}

// ErrNoSecret means the pool holds no secret for the hyperscaler.
var ErrNoSecret = errors.New("no hyperscaler account secret")

// Resolve picks the secret for a tenant's runtime. The choice is a rendezvous hash of tenant and
// secret names: the same tenant always gets the same account (what Gardener and the tenant's other
// runtimes already use), tenants spread evenly, and adding a secret moves only the tenants it wins.
// It keeps no state, so every broker replica picks the same secret.
func (p Pool) Resolve(typ Type, tenant string) (string, error) {
	secrets := p.secrets[typ]
	if len(secrets) == 0 {
		return "", fmt.Errorf("%w for hyperscaler %q (configure APP_HYPERSCALER_ACCOUNT_POOL)", ErrNoSecret, typ)
	}
	best, bestScore := "", uint64(0)
	for _, s := range secrets {
		h := fnv.New64a()
		_, _ = h.Write([]byte(tenant + "\x00" + s))
		if score := mix(h.Sum64()); best == "" || score > bestScore {
			best, bestScore = s, score
		}
	}
	return best, nil
}

// Types lists the hyperscalers with secrets, sorted.
func (p Pool) Types() []Type {
	out := make([]Type, 0, len(p.secrets))
	for t := range p.secrets {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
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
