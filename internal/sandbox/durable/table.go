package durable

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// tableCache is how many unchanged objects a Table keeps decoded per kind; objects whose write
// is under way are kept besides, so memory is bounded by it and by the write queue, not by the
// number of objects. A provisioning's later steps come back to the objects its first steps
// created (AVS tags its evaluation, IAS configures its service provider) seconds later, so the
// cache is sized to keep them for that long with hundreds of provisionings in flight
// (docs/contributor/performance.md).
const tableCache = 1024

// Table is one kind of a stand-in's objects, read on demand from the Store: a bounded cache of
// recently used objects and those whose write is under way sits before it, so a stand-in keeps
// no per-object state in memory. Use it with the stand-in's lock held (as Durable holds it for
// a request). Lookups are further keys an object is found by (a name, a tenant…), kept as rows
// of their own (kind/lookup, by value, listing the objects' keys) and updated with the object.
type Table[T any] struct {
	d       *Durable
	kind    string
	exact   bool
	lookups map[string]lookup[T]

	entries map[string]*row[T]  // cached, changed and pending objects by key
	lru     *list.List          // unpinned, unchanged entries, most recently used first
	dirty   map[string]struct{} // changed by the request being served
}

type lookup[T any] struct {
	values func(*T) []string
	index  *Table[lookupRow] // one row per value listing its keys
	pairs  *Table[bool]      // or, for a shared lookup, one row per value and key
	// unique: no two objects share a value, nor does a value come back (random tokens, fresh
	// UUIDs), so a value's row lists its one object and is written without reading it.
	unique bool
}

// lookupRow is a lookup's row for one value: the keys of the objects that have it, and the
// counters kept by the value (Table.Count), which outlive the objects. Without counters it is
// written as the list of keys alone.
type lookupRow struct {
	Keys   []string       `json:"keys"`
	Counts map[string]int `json:"counts,omitempty"`
}

type plainLookupRow lookupRow

func (r lookupRow) MarshalJSON() ([]byte, error) {
	if len(r.Counts) == 0 {
		return json.Marshal(r.Keys)
	}
	return json.Marshal(plainLookupRow(r))
}

func (r *lookupRow) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '[' {
		return json.Unmarshal(b, &r.Keys)
	}
	return json.Unmarshal(b, (*plainLookupRow)(r))
}

// empty: the row can go.
func (r *lookupRow) empty() bool { return len(r.Keys) == 0 && len(r.Counts) == 0 }

// pairSep separates a value from a key in a shared lookup's rows: it is in neither.
const pairSep = "\x1f"

// row is one object known to the table: v nil when it does not exist (deleted, or absent).
type row[T any] struct {
	t      *Table[T]
	key    string
	v      *T
	stored map[string][]string // the lookup values the store has (or is being written with)
	pins   int                 // writes under way that hold its value
	elem   *list.Element
}

// NewTable registers the table of kind on d; call it before Load. Exact tables decode the
// numbers in untyped values as json.Number.
func NewTable[T any](d *Durable, kind string, exact bool) *Table[T] {
	t := &Table[T]{d: d, kind: kind, exact: exact, lookups: map[string]lookup[T]{}}
	t.reset()
	d.register(kind, t)
	return t
}

// Lookup registers a lookup of the table: values gives the values an object is found by with
// Find(name, value). Call it before Load.
func (t *Table[T]) Lookup(name string, values func(*T) []string) {
	t.lookups[name] = lookup[T]{values: values, index: NewTable[lookupRow](t.d, t.kind+"/"+name, false)}
}

// UniqueLookup is Lookup for values that no two objects share and that no earlier object had
// (random tokens, fresh UUIDs): a value's row, which can only list the one object, is written and
// deleted without reading it first. It keeps no Counts.
func (t *Table[T]) UniqueLookup(name string, values func(*T) []string) {
	t.lookups[name] = lookup[T]{values: values, index: NewTable[lookupRow](t.d, t.kind+"/"+name, false), unique: true}
}

// SharedLookup is Lookup for values that many objects share (a parent every object names): a
// value's objects are not listed in one row, which each of them would rewrite, but each pair has
// a row of its own, found by a prefix read.
func (t *Table[T]) SharedLookup(name string, values func(*T) []string) {
	t.lookups[name] = lookup[T]{values: values, pairs: NewTable[bool](t.d, t.kind+"/"+name, false)}
}

func (t *Table[T]) reset() {
	t.entries = map[string]*row[T]{}
	t.lru = list.New()
	t.dirty = map[string]struct{}{}
}

func (t *Table[T]) pinned(fn func(string)) {
	for k, e := range t.entries {
		if e.pins > 0 {
			fn(knownKey(t.kind, k))
		}
	}
}

// Get returns the object with key, nil when there is none. The value is the table's: change it
// only to Put it back in the same request.
func (t *Table[T]) Get(key string) (*T, bool) {
	e := t.load(key)
	return e.v, e.v != nil
}

func (t *Table[T]) load(key string) *row[T] {
	if e, ok := t.entries[key]; ok {
		if e.elem != nil {
			t.lru.MoveToFront(e.elem)
		}
		return e
	}
	e := &row[T]{t: t, key: key}
	if !t.d.absent(t.kind, key) {
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		defer cancel()
		b, err := t.d.p.Store.Get(ctx, t.d.p.System, t.kind, key)
		if err == nil && b != nil {
			e.v, err = t.decode(b)
		}
		if err != nil {
			// The request goes on as if the object did not exist; Durable fails it and reloads.
			t.d.failed(fmt.Errorf("reading %s %s: %w", t.kind, key, err))
			e.v = nil
		}
	}
	e.stored = t.lookupValues(e.v)
	t.entries[key] = e
	e.elem = t.lru.PushFront(e)
	return e
}

func (t *Table[T]) decode(b []byte) (*T, error) {
	v := new(T)
	dec := json.NewDecoder(bytes.NewReader(b))
	if t.exact {
		dec.UseNumber()
	}
	if err := dec.Decode(v); err != nil {
		return nil, err
	}
	return v, nil
}

func (t *Table[T]) lookupValues(v *T) map[string][]string {
	if v == nil || len(t.lookups) == 0 {
		return nil
	}
	out := make(map[string][]string, len(t.lookups))
	for name, l := range t.lookups {
		out[name] = l.values(v)
	}
	return out
}

// Put stores v under key (new or changed), to be written before the request's answer. The row is
// read first only when the table has lookups (to move the object's old values).
func (t *Table[T]) Put(key string, v *T) {
	if len(t.lookups) == 0 {
		t.set(key, v)
		return
	}
	e := t.load(key)
	e.v = v
	t.dirty[key] = struct{}{}
}

// Create stores v under key, which no object has: a random key (a UUID) or one given by a durable
// sequence. Nothing is read from the store, as Put would to learn the object's lookup values;
// the row is written as it is, replacing any.
func (t *Table[T]) Create(key string, v *T) {
	t.set(key, v)
}

// set makes v (nil: none) the object with key without reading the store: for a new key, or in a
// table without lookups (a row says nothing beyond its value, so writing it blindly is right).
func (t *Table[T]) set(key string, v *T) {
	e, ok := t.entries[key]
	if !ok {
		e = &row[T]{t: t, key: key}
		t.entries[key] = e
		e.elem = t.lru.PushFront(e)
	} else if e.elem != nil {
		t.lru.MoveToFront(e.elem)
	}
	e.v = v
	t.dirty[key] = struct{}{}
}

// Delete deletes the object with key, if any.
func (t *Table[T]) Delete(key string) {
	if len(t.lookups) == 0 {
		t.set(key, nil)
		return
	}
	e := t.load(key)
	e.v = nil
	t.dirty[key] = struct{}{}
}

// Find returns the objects whose lookup name has value, by key. Lookups are updated when a
// request's changes are collected: an object this request changed may still be found by its old
// value (with its new one), so callers check the values they rely on.
func (t *Table[T]) Find(name, value string) map[string]*T {
	l := t.lookups[name]
	var keys []string
	if l.pairs != nil {
		for pair := range l.pairs.prefix(value + pairSep) {
			keys = append(keys, strings.TrimPrefix(pair, value+pairSep))
		}
	} else if row, ok := l.index.Get(value); ok {
		keys = row.Keys
	}
	out := map[string]*T{}
	for _, k := range keys {
		if v, ok := t.Get(k); ok {
			out[k] = v
		}
	}
	return out
}

// Counts returns counters by the values of the lookup name (a Lookup's, not a SharedLookup's),
// kept in the lookup's rows: counters by a name objects are found by (creations by name, which
// outlive the objects) need no row, nor read, of their own. former is the kind of the rows in
// which a stand-in kept them as Counts, a row each; they still count. Call it before Load; use
// Add rather than Inc (which reads the former row).
func (t *Table[T]) Counts(name, counter, former string) *Counts {
	if t.lookups[name].unique {
		panic(fmt.Sprintf("sandbox: counts by the unique lookup %s of %s", name, t.kind))
	}
	index := t.lookups[name].index
	return &Counts{t: NewTable[int](t.d, former, false), byValue: &valueCounts{
		add: func(value string, n int) {
			row := lookupRow{Counts: map[string]int{}}
			if have, ok := index.Get(value); ok {
				row.Keys = have.Keys
				maps.Copy(row.Counts, have.Counts)
			}
			row.Counts[counter] += n
			index.Put(value, &row)
		},
		get: func(value string) int {
			row, _ := index.Get(value)
			if row == nil {
				return 0
			}
			return row.Counts[counter]
		},
		all: func() map[string]int {
			out := map[string]int{}
			for value, row := range index.All() {
				if n := row.Counts[counter]; n != 0 {
					out[value] = n
				}
			}
			return out
		},
	}}
}

// prefix returns the objects whose key starts with p, by key: the store's rows merged with what
// the table has cached, changed or is writing.
func (t *Table[T]) prefix(p string) map[string]*T {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	rows, err := t.d.p.Store.Prefix(ctx, t.d.p.System, t.kind, p)
	if err != nil {
		t.d.failed(fmt.Errorf("reading %s %s*: %w", t.kind, p, err))
	}
	return t.merge(rows, func(k string) bool { return strings.HasPrefix(k, p) })
}

// merge decodes rows read from the store, replacing them with the table's entries among those
// keys for which in is true.
func (t *Table[T]) merge(rows map[string][]byte, in func(key string) bool) map[string]*T {
	out := make(map[string]*T, len(rows))
	for k, b := range rows {
		if _, cached := t.entries[k]; cached {
			continue
		}
		v, err := t.decode(b)
		if err != nil {
			t.d.failed(fmt.Errorf("decoding %s %s: %w", t.kind, k, err))
			continue
		}
		out[k] = v
	}
	for k, e := range t.entries {
		if e.v != nil && in(k) {
			out[k] = e.v
		}
	}
	return out
}

// All returns every object by key: a scan of the kind, for inspection and the rare list of
// everything. Objects that are not cached are decoded for the call only.
func (t *Table[T]) All() map[string]*T {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	rows, err := t.d.p.Store.Kind(ctx, t.d.p.System, t.kind)
	if err != nil {
		t.d.failed(fmt.Errorf("reading %s: %w", t.kind, err))
	}
	return t.merge(rows, func(string) bool { return true })
}

// Keys returns the keys of All, sorted.
func (t *Table[T]) Keys() []string {
	return slices.Sorted(maps.Keys(t.All()))
}

// collect encodes what the request changed into rows and pins those entries until their write
// is done; lookups changed by it are updated (and collected after, as tables of their own).
func (t *Table[T]) collect(rows Rows, pins *[]unpinner) error {
	if len(t.dirty) == 0 {
		return nil
	}
	keys := slices.Sorted(maps.Keys(t.dirty))
	t.dirty = map[string]struct{}{}
	if rows[t.kind] == nil {
		rows[t.kind] = map[string][]byte{}
	}
	var err error
	for _, k := range keys {
		e := t.entries[k]
		if e == nil {
			continue
		}
		var b []byte
		if e.v != nil {
			var merr error
			if b, merr = encodeRow(e.v); merr != nil && err == nil {
				err = fmt.Errorf("encoding %s %s: %w", t.kind, k, merr)
			}
		}
		rows[t.kind][k] = b
		if b != nil {
			// Every row a Table writes passes here, before its write.
			t.d.sawKey(t.kind, k)
		}
		now := t.lookupValues(e.v)
		for name, l := range t.lookups {
			l.update(k, e.stored[name], now[name])
		}
		e.stored = now
		if e.elem != nil {
			t.lru.Remove(e.elem)
			e.elem = nil
		}
		e.pins++
		*pins = append(*pins, e)
	}
	return err
}

// update moves key from the lookup's old values to its new ones.
func (l lookup[T]) update(key string, old, now []string) {
	if l.pairs != nil {
		// A pair's row is all it says: written and deleted without reading it first.
		for _, v := range old {
			if !slices.Contains(now, v) {
				l.pairs.set(v+pairSep+key, nil)
			}
		}
		yes := true
		for _, v := range now {
			if !slices.Contains(old, v) {
				l.pairs.set(v+pairSep+key, &yes)
			}
		}
		return
	}
	if l.unique {
		for _, v := range old {
			if !slices.Contains(now, v) {
				l.index.set(v, nil)
			}
		}
		for _, v := range now {
			if !slices.Contains(old, v) {
				l.index.set(v, &lookupRow{Keys: []string{key}})
			}
		}
		return
	}
	for _, v := range old {
		if !slices.Contains(now, v) {
			row, _ := l.index.Get(v)
			if row == nil {
				continue
			}
			rest := lookupRow{Keys: make([]string, 0, len(row.Keys)), Counts: row.Counts}
			for _, k := range row.Keys {
				if k != key {
					rest.Keys = append(rest.Keys, k)
				}
			}
			if rest.empty() {
				l.index.Delete(v)
			} else {
				l.index.Put(v, &rest)
			}
		}
	}
	for _, v := range now {
		if !slices.Contains(old, v) {
			var row lookupRow
			if have, ok := l.index.Get(v); ok {
				row.Keys, row.Counts = append(row.Keys, have.Keys...), have.Counts
			}
			if !slices.Contains(row.Keys, key) {
				row.Keys = append(row.Keys, key)
			}
			l.index.Put(v, &row)
		}
	}
}

// trim forgets the least recently used unchanged entries beyond the cache's size.
func (t *Table[T]) trim() {
	for t.lru.Len() > tableCache {
		e := t.lru.Remove(t.lru.Back()).(*row[T])
		e.elem = nil
		if _, dirty := t.dirty[e.key]; !dirty {
			delete(t.entries, e.key)
		}
	}
}

// unpin is called, with the stand-in's lock held, when a write holding e's value is done; the
// store has it now (or the stand-in reloads), so e may be forgotten.
func (e *row[T]) unpin() {
	e.pins--
	if e.pins > 0 || e.t.entries[e.key] != e || e.elem != nil {
		return
	}
	if _, dirty := e.t.dirty[e.key]; dirty {
		return
	}
	e.elem = e.t.lru.PushFront(e)
	e.t.trim()
}

type unpinner interface{ unpin() }

// table is what Durable does with every Table.
type table interface {
	collect(rows Rows, pins *[]unpinner) error
	trim()
	reset()
	// pinned calls fn with the knownKey of every entry whose write is under way.
	pinned(fn func(string))
}
