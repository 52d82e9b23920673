package servicemanager

import (
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// maxCachedPlans bounds the plan cache: one entry per distinct credentials and plan; beyond that
// many the least recently used goes, rather than the cache growing with the number of subaccounts.
const maxCachedPlans = 1024

// planCache keeps plan IDs resolved from catalog names, so that provisioning an instance does not
// read the offering and the plan on every call. Entries are per credentials (an offering's
// visibility and plan IDs may differ between subaccounts) and expire after ttl; a ttl <= 0 turns
// the cache off. A creation that fails forgets its entry.
type planCache struct {
	ttl     time.Duration
	now     func() time.Time
	entries *lru.Cache[planKey, cachedPlan] // safe for concurrent use
}

type planKey struct{ url, clientID, offering, plan string }

type cachedPlan struct {
	id      string
	expires time.Time
}

func newPlanCache(ttl time.Duration, now func() time.Time) *planCache {
	entries, _ := lru.New[planKey, cachedPlan](maxCachedPlans) // a positive size never fails
	return &planCache{ttl: ttl, now: now, entries: entries}
}

func keyOf(creds Credentials, offering, plan string) planKey {
	return planKey{url: strings.TrimRight(creds.URL, "/"), clientID: creds.ClientID, offering: offering, plan: plan}
}

func (p *planCache) get(creds Credentials, offering, plan string) (string, bool) {
	if p.ttl <= 0 {
		return "", false
	}
	e, ok := p.entries.Get(keyOf(creds, offering, plan))
	if !ok || !p.now().Before(e.expires) {
		return "", false
	}
	return e.id, true
}

func (p *planCache) put(creds Credentials, offering, plan, id string) {
	if p.ttl <= 0 {
		return
	}
	p.entries.Add(keyOf(creds, offering, plan), cachedPlan{id: id, expires: p.now().Add(p.ttl)})
}

func (p *planCache) forget(creds Credentials, offering, plan string) {
	p.entries.Remove(keyOf(creds, offering, plan))
}
