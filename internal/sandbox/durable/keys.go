package durable

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
// the database, a large share of a provisioning's statements. A Bloom
// filter of every key the system's rows have, listed from the store at load and then kept up to
// date as the stand-in writes, answers "certainly absent" for them without the read. This relies
// on what the stand-in's object cache already relies on: the stand-in is the only writer of its
// system's rows, so a key enters the store only through Table.collect, which adds it to the
// filter before the write. A false positive costs the read it cost before. The filter does not
// forget deleted keys (they are read as before) until it outgrows its capacity and is listed
// again.
type knownKeys struct {
	// filter answers once learnt; nil before (and without a KeyLister).
	filter *bloom.BloomFilter
	// capacity is what the filter was sized for, added how many keys it holds: past its
	// capacity it is learnt again, larger (its false positives would otherwise grow).
	capacity, added uint
	// min is the least capacity (minKnownKeys when 0; tests set less).
	min uint
	// learning: a listing of the store is under way; the keys written meanwhile wait in pending
	// (and go into the current filter too, which answers until the new one is in).
	learning bool
	pending  []string
}

// knownKeysFalsePositives is the filter's false positive rate at its capacity.
const knownKeysFalsePositives = 0.01

// minKnownKeys is the least capacity of the filter: ~300 KB of bits per system, which the
// collector counts as live heap (at GOGC=200 the heap may grow to three times it). A listing
// sizes the filter for four times the keys it found.
const minKnownKeys = 1 << 18

// knownKey is a row's name in the filter and in pending: kind and key, which holds no NUL.
func knownKey(kind, key string) string { return kind + "\x00" + key }

// learnKeys starts learning the system's keys from the store unless it knows them or is
// learning them; called with the stand-in's lock held, by Load, before the requests it serves.
func (d *Durable) learnKeys() {
	if d.known.filter == nil {
		d.learn(nil)
	}
}

// learn lists the system's keys into a new filter in the background; called with the lock
// held. pending are keys written but possibly not yet in the store when the listing takes its
// snapshot: they go into the new filter whatever the listing finds.
func (d *Durable) learn(pending []string) {
	lister, ok := d.p.Store.(KeyLister)
	if !ok || d.known.learning {
		return
	}
	d.known.learning, d.known.pending = true, pending
	// At least twice the capacity outgrown: the keys written while listing count too.
	least := max(d.known.min, 2*d.known.capacity)
	if least == 0 {
		least = minKnownKeys
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		// The filter is filled from the listing without the lock, which requests hold.
		var keys []string
		err := lister.Keys(ctx, d.p.System, func(kind, key string) { keys = append(keys, knownKey(kind, key)) })
		var f *bloom.BloomFilter
		capacity := max(uint(4*len(keys)), least)
		if err == nil {
			f = bloom.NewWithEstimates(capacity, knownKeysFalsePositives)
			for _, k := range keys {
				f.AddString(k)
			}
		}
		d.p.Lock.Lock()
		defer d.p.Lock.Unlock()
		d.known.learning = false
		pending := d.known.pending
		d.known.pending = nil
		if f == nil {
			// The filter there was (if any) answers on; without one every read goes to the
			// store, as without a KeyLister, until a reload learns again.
			return
		}
		for _, k := range pending {
			f.AddString(k)
		}
		d.known.filter, d.known.capacity, d.known.added = f, capacity, uint(len(keys)+len(pending))
	}()
}

// sawKey records that the row of kind with key may exist from now on; called with the lock
// held, before the row's write.
func (d *Durable) sawKey(kind, key string) {
	if d.known.learning {
		d.known.pending = append(d.known.pending, knownKey(kind, key))
	}
	if d.known.filter == nil {
		return
	}
	d.known.filter.AddString(knownKey(kind, key))
	if d.known.added++; d.known.added > d.known.capacity && !d.known.learning {
		// Learnt again: the new listing's snapshot may miss the rows whose writes are under way
		// (every Table entry still pinned) and this one, not yet pinned; they start its pending.
		pending := []string{knownKey(kind, key)}
		for _, t := range d.order {
			t.pinned(func(k string) { pending = append(pending, k) })
		}
		d.learn(pending)
	}
}

// absent reports that the row of kind with key certainly does not exist; called with the lock held.
func (d *Durable) absent(kind, key string) bool {
	return d.known.filter != nil && !d.known.filter.TestString(knownKey(kind, key))
}
