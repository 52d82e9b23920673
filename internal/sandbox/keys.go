package sandbox

import (
	"context"
	"time"

	"github.com/bits-and-blooms/bloom/v3"
)

// KeyLister is a Store that can list a system's keys without their values. With one, a
// stand-in learns which keys exist when it loads and skips reading keys that cannot exist.
type KeyLister interface {
	// Keys calls fn with the kind and key of every row of the system.
	Keys(ctx context.Context, system string, fn func(kind, key string)) error
}

// Most reads a stand-in makes that find nothing are of keys that never existed: the name a
// client looks up before creating its object, a counter by a new name. Each was a round trip to
// the database (11 per provisioning in the e2e bench, a quarter of its statements). A Bloom
// filter of every key the system's rows have, learnt once at load from the store and then kept
// up to date as the stand-in changes objects, answers "certainly absent" for them without the
// read. This relies on what the stand-in's object cache already relies on: the stand-in is the
// only writer of its system's rows, so a key enters the store only through Table.collect, which
// adds it to the filter before the write. A false positive costs the read it costs today; the filter never
// forgets a key, so deleted keys are read as before.
type knownKeys struct {
	// filter answers once learnt; nil before (and without a KeyLister).
	filter *bloom.BloomFilter
	// learning: the scan of the store is under way; the keys set meanwhile wait in pending.
	learning bool
	pending  []string
}

// knownKeysFalsePositives is the filter's false positive rate at its capacity.
const knownKeysFalsePositives = 0.01

// minKnownKeys is the least capacity of the filter: ~300 KB of bits per system, which the
// collector counts as live heap (at GOGC=200 the heap may grow to three times it). A listing
// sizes the filter for four times the keys it found, so a restart makes room for a grown fleet;
// a stand-in that outgrows its filter without one answers more reads from the store, never
// a wrong "absent".
const minKnownKeys = 1 << 18

func knownKey(kind, key string) []byte { return []byte(kind + "\x00" + key) }

// learnKeys starts learning the system's keys from the store unless it knows them or is
// learning them; called with the stand-in's lock held, by Load, before the requests it serves.
func (d *Durable) learnKeys() {
	lister, ok := d.p.Store.(KeyLister)
	if !ok || d.known.learning || d.known.filter != nil {
		return
	}
	d.known.learning = true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		// The filter is filled from the listing without the lock, which requests hold.
		var keys [][]byte
		err := lister.Keys(ctx, d.p.System, func(kind, key string) { keys = append(keys, knownKey(kind, key)) })
		var f *bloom.BloomFilter
		if err == nil {
			f = bloom.NewWithEstimates(max(uint(4*len(keys)), minKnownKeys), knownKeysFalsePositives)
			for _, k := range keys {
				f.Add(k)
			}
		}
		d.p.Lock.Lock()
		defer d.p.Lock.Unlock()
		d.known.learning = false
		pending := d.known.pending
		d.known.pending = nil
		if f == nil {
			// Every read goes to the store, as without a KeyLister, until a reload learns again.
			return
		}
		for _, k := range pending {
			f.AddString(k)
		}
		d.known.filter = f
	}()
}

// sawKey records that the row of kind with key may exist from now on; called with the lock held.
func (d *Durable) sawKey(kind, key string) {
	switch {
	case d.known.filter != nil:
		d.known.filter.Add(knownKey(kind, key))
	case d.known.learning:
		d.known.pending = append(d.known.pending, kind+"\x00"+key)
	}
}

// absent reports that the row of kind with key certainly does not exist; called with the lock held.
func (d *Durable) absent(kind, key string) bool {
	return d.known.filter != nil && !d.known.filter.Test(knownKey(kind, key))
}
