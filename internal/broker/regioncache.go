package broker

import "sync"

// maxCachedCatalogs bounds the regions a regionCache keeps: regions come from request paths, so
// an unbounded map would grow with whatever authenticated clients send. Past it, a region's
// value is built per call (still correct, only slower).
const maxCachedCatalogs = 256

// regionCache keeps what is built from the static catalog per region: regions come from
// request paths, so at most maxCachedCatalogs are kept and later ones are built per call.
type regionCache[V any] struct {
	mu       sync.RWMutex
	byRegion map[string]V
}

func newRegionCache[V any]() *regionCache[V] {
	return &regionCache[V]{byRegion: map[string]V{}}
}

// get returns the region's value, building it on first use.
func (c *regionCache[V]) get(region string, build func() (V, error)) (V, error) {
	c.mu.RLock()
	v, ok := c.byRegion[region]
	c.mu.RUnlock()
	if ok {
		return v, nil
	}
	v, err := build()
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	if len(c.byRegion) < maxCachedCatalogs {
		c.byRegion[region] = v
	}
	c.mu.Unlock()
	return v, nil
}
