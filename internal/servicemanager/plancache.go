package servicemanager

import (
	"strings"
	"sync"
	"time"
)

// maxCachedPlans bounds the plan cache: one entry per distinct credentials and plan, and beyond
// that many the cache starts over rather than growing with the number of subaccounts.
const maxCachedPlans = 1024

// planCache keeps plan IDs resolved from catalog names, so that provisioning an instance does not
// read the offering and the plan on every call. Entries are per credentials (an offering's
// visibility and plan IDs may differ between subaccounts) and expire after ttl; a ttl <= 0 turns
// the cache off. A creation that fails forgets its entry.
type planCache struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	entries map[planKey]cachedPlan
}

type planKey struct{ url, clientID, offering, plan string }

type cachedPlan struct {
	id      string
	expires time.Time
}

func newPlanCache(ttl time.Duration, now func() time.Time) *planCache {
	return &planCache{ttl: ttl, now: now, entries: map[planKey]cachedPlan{}}
}

func keyOf(creds Credentials, offering, plan string) planKey {
	return planKey{url: strings.TrimRight(creds.URL, "/"), clientID: creds.ClientID, offering: offering, plan: plan}
}

func (p *planCache) get(creds Credentials, offering, plan string) (string, bool) {
	if p.ttl <= 0 {
		return "", false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.entries[keyOf(creds, offering, plan)]
	if !ok || !p.now().Before(e.expires) {
		return "", false
	}
	return e.id, true
}

func (p *planCache) put(creds Credentials, offering, plan, id string) {
	if p.ttl <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.entries) >= maxCachedPlans {
		clear(p.entries)
	}
	p.entries[keyOf(creds, offering, plan)] = cachedPlan{id: id, expires: p.now().Add(p.ttl)}
}

func (p *planCache) forget(creds Credentials, offering, plan string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.entries, keyOf(creds, offering, plan))
}
