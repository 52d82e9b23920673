package durable

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/jsonappend"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
)

// flushTimeout bounds writing one request's changes; the write does not end with the request's
// context, so a client going away cannot leave memory ahead of the store.
const flushTimeout = 10 * time.Second

// Persist is how a stand-in keeps its state in a Store through Durable.
type Persist struct {
	// Store keeps the state; a new MemoryStore when nil.
	Store Store
	// System is the stand-in's name, under which its rows are kept.
	System string
	// Lock is the stand-in's lock over its state; Durable holds it while calling Encode and Restore.
	Lock sync.Locker
	// Encode returns the current value of the object of kind with key, stored as JSON, or false
	// when it no longer exists; nil for a stand-in that keeps every object in Tables.
	Encode func(kind, key string) (any, bool)
	// Restore replaces the stand-in's objects with those in rows (the kinds of Tables and Counts
	// excluded); empty rows make the stand-in empty. Nil for a stand-in that keeps every object
	// in Tables: nothing is read at Load then.
	Restore func(rows Rows) error
	// Kinds are the kinds Restore needs, read one by one at Load; every row of the system is
	// read when empty.
	Kinds []string
}

// Durable writes a stand-in's state through to a Store: the stand-in marks the objects a request
// changed (Touch) and Durable writes them before the request's answer goes out. Requests to one
// stand-in are served one at a time in memory; their writes are group-committed: while one
// transaction is written, the requests served meanwhile queue theirs, and the next transaction
// writes all of them at once (in order, a later value of an object replacing an earlier one).
// Every answer waits for the write of its own request, which comes after those of every request
// served before it, so no answer is given from state that is not yet written, and a stand-in
// serves as many requests per second as the store commits batches, not single requests.
// When a write fails, every request it and the queue held answers 503 and the stand-in goes
// back to the state in the store. Objects are kept in Tables, read from the store on demand
// (nothing per object stays in memory), counters with Counts (Tables too).
type Durable struct {
	p      Persist
	req    sync.Mutex
	dirty  map[string]map[string]struct{} // guarded by p.Lock
	tables map[string]table               // registered before Load; fixed afterwards
	order  []table                        // tables in the order registered: a table before its lookups
	// readErr: reading a Table failed while serving the request; it fails and the stand-in
	// reloads. Guarded by p.Lock.
	readErr error

	// Group commit, guarded by w (taken after req and p.Lock, never before).
	w       sync.Mutex
	written *sync.Cond // signalled when a batch is written or failed
	queue   []*ticket  // requests served and not yet being written, in order
	writing bool       // a batch is being written
	// broken: a write failed and memory is ahead of the store; the next request (holding req,
	// with nothing being written) reloads before it is served.
	broken error

	// known: the keys the system's rows may have (keys.go), guarded by p.Lock.
	known knownKeys
}

// ticket is one request's changes, waiting to be written.
type ticket struct {
	rows Rows
	pins []unpinner // Table entries whose value this write holds
	done bool
	err  error
}

// NewDurable returns a Durable on p; register the stand-in's Counts, then Load.
func NewDurable(p Persist) *Durable {
	if p.Store == nil {
		p.Store = NewMemoryStore()
	}
	d := &Durable{p: p, dirty: map[string]map[string]struct{}{}, tables: map[string]table{}}
	d.written = sync.NewCond(&d.w)
	return d
}

// Counts returns the durable counters of kind, registering them; call it before Load.
func (d *Durable) Counts(kind string) *Counts {
	return &Counts{t: NewTable[int](d, kind, false)}
}

// register is called by NewTable.
func (d *Durable) register(kind string, t table) {
	d.tables[kind] = t
	d.order = append(d.order, t)
}

// failed records that reading the store failed while serving a request; called with the lock held.
func (d *Durable) failed(err error) {
	if d.readErr == nil {
		d.readErr = err
	}
}

// Load replaces the stand-in's state with what the store holds: the objects it keeps in memory
// are read, Tables forget what they cached.
func (d *Durable) Load(ctx context.Context) error {
	rows, err := d.read(ctx)
	if err != nil {
		return fmt.Errorf("loading the %s stand-in's state: %w", d.p.System, err)
	}
	d.p.Lock.Lock()
	defer d.p.Lock.Unlock()
	if err := d.restore(rows); err != nil {
		return fmt.Errorf("loading the %s stand-in's state: %w", d.p.System, err)
	}
	d.learnKeys()
	return nil
}

// read reads the rows Restore needs.
func (d *Durable) read(ctx context.Context) (Rows, error) {
	switch {
	case d.p.Restore == nil:
		return Rows{}, nil
	case len(d.p.Kinds) == 0:
		return d.p.Store.Load(ctx, d.p.System)
	}
	rows := Rows{}
	for _, kind := range d.p.Kinds {
		keys, err := d.p.Store.Kind(ctx, d.p.System, kind)
		if err != nil {
			return nil, err
		}
		rows[kind] = keys
	}
	return rows, nil
}

// restore is called with the lock held.
func (d *Durable) restore(rows Rows) error {
	d.dirty = map[string]map[string]struct{}{}
	d.readErr = nil
	for _, t := range d.order {
		t.reset()
	}
	if d.p.Restore == nil {
		return nil
	}
	objects := Rows{}
	for kind, keys := range rows {
		if _, ok := d.tables[kind]; !ok {
			objects[kind] = keys
		}
	}
	return d.p.Restore(objects)
}

// Touch marks the object of kind with key as changed (or deleted); call it with the lock held.
func (d *Durable) Touch(kind, key string) {
	if d.dirty[kind] == nil {
		d.dirty[kind] = map[string]struct{}{}
	}
	d.dirty[kind][key] = struct{}{}
}

// collect encodes the changed objects and forgets the marks; called with req held.
func (d *Durable) collect() (Rows, []unpinner, error) {
	d.p.Lock.Lock()
	defer d.p.Lock.Unlock()
	rows := Rows{}
	var pins []unpinner
	err := d.readErr
	d.readErr = nil
	for _, t := range d.order {
		if terr := t.collect(rows, &pins); terr != nil && err == nil {
			err = terr
		}
	}
	for _, t := range d.order {
		t.trim()
	}
	for kind, keys := range d.dirty {
		rows[kind] = make(map[string][]byte, len(keys))
		for key := range keys {
			v, ok := d.p.Encode(kind, key)
			if !ok {
				rows[kind][key] = nil
				continue
			}
			b, merr := encodeRow(v)
			if merr != nil && err == nil {
				err = fmt.Errorf("encoding %s %s: %w", kind, key, merr)
			}
			rows[kind][key] = b
		}
	}
	d.dirty = map[string]map[string]struct{}{}
	return rows, pins, err
}

// enqueue queues what the request just served changed; called with req held, so tickets are
// queued in the order the requests were served.
func (d *Durable) enqueue() *ticket {
	rows, pins, err := d.collect()
	d.w.Lock()
	defer d.w.Unlock()
	t := &ticket{rows: rows, pins: pins}
	switch {
	case d.broken != nil:
		t.done, t.err = true, d.broken
	case err != nil:
		// Memory holds what cannot be written: fail this request and reload before the next.
		t.done, t.err = true, err
		d.broken = err
	default:
		d.queue = append(d.queue, t)
	}
	return t
}

// unpin lets the Table entries a batch held be forgotten, now that it is written (or the
// stand-in reloads); called without any lock.
func (d *Durable) unpin(batch []*ticket) {
	d.p.Lock.Lock()
	defer d.p.Lock.Unlock()
	for _, t := range batch {
		for _, e := range t.pins {
			e.unpin()
		}
		t.pins = nil
	}
}

// commit waits until t is written: the first waiter that finds no write going on writes every
// ticket queued so far in one transaction; the others wait for it. Called without req.
func (d *Durable) commit(t *ticket) error {
	d.w.Lock()
	defer d.w.Unlock()
	for !t.done {
		if d.writing {
			d.written.Wait()
			continue
		}
		batch := d.queue
		d.queue, d.writing = nil, true
		d.w.Unlock()
		err := d.write(batch)
		d.unpin(batch)
		d.w.Lock()
		d.writing = false
		for _, b := range batch {
			b.done, b.err = true, err
		}
		if err != nil {
			// Requests served after the batch built on state that is now lost: they fail too.
			for _, q := range d.queue {
				q.done, q.err = true, err
			}
			d.queue = nil
			d.broken = err
		}
		d.written.Broadcast()
	}
	if d.broken != nil && d.req.TryLock() {
		// Nobody is being served: go back to the stored state now rather than at the next request.
		d.w.Unlock()
		_ = d.recover(context.Background())
		d.req.Unlock()
		d.w.Lock()
	}
	return t.err
}

// write writes a batch's changes in one transaction; it does not end with any request's
// context, so a client going away cannot leave memory ahead of the store.
func (d *Durable) write(batch []*ticket) error {
	rows := Rows{}
	for _, t := range batch {
		for kind, keys := range t.rows {
			if rows[kind] == nil {
				rows[kind] = map[string][]byte{}
			}
			for key, v := range keys {
				rows[kind][key] = v
			}
		}
	}
	if len(rows) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	return d.p.Store.Write(ctx, d.p.System, rows)
}

// drained waits until nothing is queued or being written; called with req held (no new tickets).
func (d *Durable) drained() {
	d.w.Lock()
	defer d.w.Unlock()
	for d.writing || len(d.queue) > 0 {
		d.written.Wait()
	}
}

// recover reloads the stored state after a failed write; called with req held.
func (d *Durable) recover(ctx context.Context) error {
	d.w.Lock()
	broken := d.broken
	d.w.Unlock()
	if broken == nil {
		return nil
	}
	d.drained()
	if err := d.Load(ctx); err != nil {
		return fmt.Errorf("%w; then %w", broken, err)
	}
	d.w.Lock()
	d.broken = nil
	d.w.Unlock()
	return nil
}

// Handler serves next one request at a time and writes what each changed before its answer,
// which is held back until then. When the write fails, the stand-in goes back to the state in
// the store and the answer is 503.
func (d *Durable) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The body is read before the turn is taken, so a slow client holds up no other request.
		if !sandbox.BufferBody(w, r) {
			return
		}
		d.req.Lock()
		if err := d.recover(r.Context()); err != nil {
			d.req.Unlock()
			d.unavailable(w, err)
			return
		}
		// A holder that already keeps the whole answer until the handler returns (the in-process
		// transport) is written to directly: nothing of it goes out before the commit.
		buf, held := w.(*BufferedResponse)
		if !held {
			buf = NewBufferedResponse()
		}
		next.ServeHTTP(buf, r)
		t := d.enqueue()
		d.req.Unlock()
		if err := d.commit(t); err != nil {
			if held {
				buf.Reset()
			}
			d.unavailable(w, err)
			return
		}
		if !held {
			buf.CopyTo(w)
		}
	})
}

func (d *Durable) unavailable(w http.ResponseWriter, err error) {
	sandbox.WriteJSON(w, http.StatusServiceUnavailable, errorBody{Message: fmt.Sprintf("sandbox: saving the %s stand-in's state: %v", d.p.System, err)})
}

// Do runs fn as a request of its own, for a stand-in that another one calls directly: alone
// among the stand-in's requests, with the stand-in's lock held, and writes what fn changed before
// returning. When the write fails, the stand-in goes back to the state in the store.
func (d *Durable) Do(ctx context.Context, fn func() error) error {
	d.req.Lock()
	if err := d.recover(ctx); err != nil {
		d.req.Unlock()
		return fmt.Errorf("saving the %s stand-in's state: %w", d.p.System, err)
	}
	d.p.Lock.Lock()
	err := fn()
	d.p.Lock.Unlock()
	t := d.enqueue()
	d.req.Unlock()
	if ferr := d.commit(t); ferr != nil {
		return fmt.Errorf("saving the %s stand-in's state: %w", d.p.System, ferr)
	}
	return err
}

// Reset clears the stand-in's state in the store and in memory, after every write under way.
func (d *Durable) Reset(ctx context.Context) error {
	d.req.Lock()
	defer d.req.Unlock()
	d.drained()
	if err := d.p.Store.Clear(ctx, d.p.System); err != nil {
		return fmt.Errorf("resetting the %s stand-in: %w", d.p.System, err)
	}
	d.w.Lock()
	d.broken = nil
	d.w.Unlock()
	d.p.Lock.Lock()
	defer d.p.Lock.Unlock()
	return d.restore(Rows{})
}

// Each decodes every row of kind as a T and calls fn with its key.
func Each[T any](rows Rows, kind string, fn func(key string, v T)) error {
	return each(rows, kind, false, fn)
}

// EachExact is Each decoding the numbers in untyped values as json.Number, for stand-ins that keep
// the numbers of requests exact.
func EachExact[T any](rows Rows, kind string, fn func(key string, v T)) error {
	return each(rows, kind, true, fn)
}

func each[T any](rows Rows, kind string, useNumber bool, fn func(key string, v T)) error {
	for key, b := range rows[kind] {
		var v T
		dec := json.NewDecoder(bytes.NewReader(b))
		if useNumber {
			dec.UseNumber()
		}
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("decoding %s %s: %w", kind, key, err)
		}
		fn(key, v)
	}
	return nil
}

// Counts are durable counters by key, read on demand (a Table); use them with the stand-in's
// lock held.
type Counts struct {
	t       *Table[int]
	one     *Table[tallyRow] // or, for a Tally, every counter in one row
	byValue *valueCounts     // or, Table.Counts, in a lookup's rows (t: the former rows)
}

// valueCounts are Table.Counts' counters in a lookup's rows.
type valueCounts struct {
	add func(value string, n int)
	get func(value string) int
	all func() map[string]int
}

// Tally returns the durable counters of kind kept in one row (key ""), registering them; call it
// before Load. For few counters that nearly every request changes (a stand-in's calls by
// operation): a batch of requests writes one row, not one per counter it touched.
func (d *Durable) Tally(kind string) *Counts {
	return &Counts{one: NewTable[tallyRow](d, kind, false)}
}

// tallyRow is a Tally's row: the counters by key. A stand-in that kept them as Counts has a row
// per counter (a number); the first change folds them into the tally's row.
type tallyRow struct {
	m map[string]int
	n int // a row of Counts
}

// MarshalJSON writes the counters as json.Marshal would, without reflection: a tally is
// rewritten with every request its stand-in serves, so it is on the hot path.
func (r tallyRow) MarshalJSON() ([]byte, error) {
	return jsonappend.SortedMap(make([]byte, 0, 16*len(r.m)+2), r.m, func(b []byte, n int) ([]byte, error) {
		return strconv.AppendInt(b, int64(n), 10), nil
	})
}

// encodeRow encodes a row's value. A value with its own MarshalJSON is asked directly:
// json.Marshal would re-scan and compact what it returns, a large share of the stand-ins'
// encoding; those methods return json.Marshal's compact output already.
func encodeRow(v any) ([]byte, error) {
	if m, ok := v.(json.Marshaler); ok {
		if rv := reflect.ValueOf(v); rv.Kind() != reflect.Pointer || !rv.IsNil() {
			return m.MarshalJSON()
		}
	}
	return json.Marshal(v)
}

func (r *tallyRow) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '{' {
		return json.Unmarshal(b, &r.m)
	}
	return json.Unmarshal(b, &r.n)
}

// row is the Tally's row of counters, nil until its first change.
func (c *Counts) row() *tallyRow {
	if r, ok := c.one.Get(""); ok && r.m != nil {
		return r
	}
	return nil
}

// tally returns a copy of the Tally's counters. Until the tally's row exists, the rows of former
// Counts are its counters (a scan of the kind); fold, for a change, deletes them, as the tally's
// row written with the change takes them in.
func (c *Counts) tally(fold bool) map[string]int {
	if r := c.row(); r != nil {
		return maps.Clone(r.m)
	}
	m := map[string]int{}
	for key, r := range c.one.All() {
		if key != "" {
			m[key] += r.n
			if fold {
				c.one.Delete(key)
			}
		}
	}
	return m
}

// Add adds n to the counter key.
func (c *Counts) Add(key string, n int) {
	if c.one != nil {
		// The row is the table's to change and put back (a write under way holds its encoding).
		if r := c.row(); r != nil {
			r.m[key] += n
			c.one.Put("", r)
			return
		}
		m := c.tally(true)
		m[key] += n
		c.one.Put("", &tallyRow{m: m})
		return
	}
	if c.byValue != nil {
		c.byValue.add(key, n)
		return
	}
	v := c.Get(key) + n
	c.t.Put(key, &v)
}

// Inc adds one to the counter key and returns its new value.
func (c *Counts) Inc(key string) int {
	c.Add(key, 1)
	return c.Get(key)
}

// Get returns the counter key.
func (c *Counts) Get(key string) int {
	if c.one != nil {
		if r := c.row(); r != nil {
			return r.m[key]
		}
		return c.tally(false)[key]
	}
	if c.byValue != nil {
		return c.byValue.get(key) + c.former(key)
	}
	return c.former(key)
}

// former is the counter key of c.t.
func (c *Counts) former(key string) int {
	if v, ok := c.t.Get(key); ok {
		return *v
	}
	return 0
}

// Map returns a copy of the counters.
func (c *Counts) Map() map[string]int {
	if c.one != nil {
		return c.tally(false)
	}
	out := map[string]int{}
	if c.byValue != nil {
		out = c.byValue.all()
	}
	for k, v := range c.t.All() {
		out[k] += *v
	}
	return out
}

type errorBody struct {
	Message string `json:"message"`
}
