package servicemanager

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestPlanCacheExpiresAndForgets(t *testing.T) {
	now := time.Unix(1000, 0)
	p := newPlanCache(time.Minute, func() time.Time { return now })
	a := Credentials{URL: "https://sm.example/", ClientID: "a"}
	b := Credentials{URL: "https://sm.example", ClientID: "b"}

	p.put(a, "ems", "default", "plan-1")
	id, ok := p.get(Credentials{URL: "https://sm.example", ClientID: "a"}, "ems", "default")
	assert.True(t, ok)
	assert.Equal(t, "plan-1", id)
	_, ok = p.get(b, "ems", "default")
	assert.False(t, ok, "per credentials")

	now = now.Add(time.Minute)
	_, ok = p.get(a, "ems", "default")
	assert.False(t, ok, "expired")

	p.put(a, "ems", "default", "plan-2")
	p.forget(a, "ems", "default")
	_, ok = p.get(a, "ems", "default")
	assert.False(t, ok, "forgotten")

	for i := range maxCachedPlans + 1 {
		p.put(Credentials{ClientID: string(rune('a' + i))}, "ems", "default", "x")
	}
	assert.LessOrEqual(t, p.entries.Len(), maxCachedPlans, "bounded")

	off := newPlanCache(0, time.Now)
	off.put(a, "ems", "default", "plan-1")
	_, ok = off.get(a, "ems", "default")
	assert.False(t, ok, "a ttl of 0 turns it off")
}
