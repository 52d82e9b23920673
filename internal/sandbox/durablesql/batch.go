package durablesql

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage/sqlstore"
)

// The stand-ins group-commit their writes each on its own (durable.Durable), so six of them
// wrote six transactions where one would do: on PostgreSQL, concurrent writes of the systems'
// rows (no deletes) are coalesced into one upsert, one commit. Each system has at most one
// write in flight (Durable writes its batches in order), so a statement never holds one row
// twice; should two calls of one system meet anyway, the later is written after, on its own. A
// failed statement is retried call by call, so a stand-in's bad row fails only its own write.
const (
	maxSandboxBatch     = 32
	sandboxWriteTimeout = 30 * time.Second
	sandboxBatchSQL     = `INSERT INTO sandbox_objects (system, kind, object_key, value)
			SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::text[])` + sandboxUpsert
)

// sandboxWrite is one system's rows, sorted by (kind, key), none a delete.
type sandboxWrite struct {
	system string
	rows   []sandboxRow
}

// writeCall is one Write waiting for its answer.
type writeCall struct {
	ctx  context.Context
	w    sandboxWrite
	done chan error
}

// groupWriter serves concurrent writes together: one goroutine takes a call, then every call
// waiting (up to maxSandboxBatch), and writes them with one statement. The channel is
// unbuffered, so a call that finds the writer idle is written at once, alone.
type groupWriter struct {
	stmts   *stmts
	calls   chan *writeCall
	quit    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup
}

// startWriter starts coalescing the upserts onto st's database (the store's unflushed
// sessions: a stand-in's object is flushed by the save that records it).
func (o *Objects) startWriter(st *stmts) {
	g := &groupWriter{stmts: st, calls: make(chan *writeCall), quit: make(chan struct{})}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		for {
			var first *writeCall
			select {
			case <-g.quit:
				return
			case first = <-g.calls:
			}
			batch := []*writeCall{first}
		drain:
			for len(batch) < maxSandboxBatch {
				select {
				case c := <-g.calls:
					batch = append(batch, c)
				default:
					break drain
				}
			}
			live := batch[:0]
			for _, c := range batch {
				if err := c.ctx.Err(); err != nil {
					c.done <- err
					continue
				}
				live = append(live, c)
			}
			if len(live) > 0 {
				o.writeBatch(g.stmts, live)
			}
		}
	}()
	o.writes = g
}

func (o *Objects) stopWriter() {
	if o.writes != nil {
		o.writes.stopped.Do(func() { close(o.writes.quit) })
		o.writes.wg.Wait()
	}
}

// submit hands w to the writer and waits for its answer. A call whose context ends while it is
// being written may still take effect.
func (g *groupWriter) submit(ctx context.Context, w sandboxWrite) error {
	c := &writeCall{ctx: ctx, w: w, done: make(chan error, 1)}
	select {
	case g.calls <- c:
	case <-ctx.Done():
		return ctx.Err()
	case <-g.quit:
		return errors.New("sandbox objects are closed")
	}
	select {
	case err := <-c.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writeBatch writes the calls in one statement where it can and answers each.
func (o *Objects) writeBatch(st *stmts, calls []*writeCall) {
	ctx, cancel := context.WithTimeout(context.Background(), sandboxWriteTimeout)
	defer cancel()
	var now, later []*writeCall
	seen := map[string]bool{}
	for _, c := range calls {
		if seen[c.w.system] {
			later = append(later, c)
			continue
		}
		seen[c.w.system] = true
		now = append(now, c)
	}
	if err := o.upsertAll(ctx, st, now); err != nil && len(now) > 1 {
		for _, c := range now {
			c.done <- o.upsertAll(ctx, st, []*writeCall{c})
		}
	} else {
		for _, c := range now {
			c.done <- err
		}
	}
	for _, c := range later {
		c.done <- o.upsertAll(ctx, st, []*writeCall{c})
	}
}

// upsertAll writes the rows of calls (distinct systems) in one statement, in (system, kind,
// key) order: concurrent writers lock rows in one order.
func (o *Objects) upsertAll(ctx context.Context, st *stmts, calls []*writeCall) error {
	sorted := append([]*writeCall(nil), calls...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].w.system < sorted[j].w.system })
	n := 0
	for _, c := range sorted {
		n += len(c.w.rows)
	}
	// The values go into the array as they are (no string copy of each document).
	systems, kinds, keys, values := make(sqlstore.TextArray, 0, n), make(sqlstore.TextArray, 0, n), make(sqlstore.TextArray, 0, n), make(sqlstore.ByteTextArray, 0, n)
	for _, c := range sorted {
		for _, r := range c.w.rows {
			systems, kinds, keys, values = append(systems, c.w.system), append(kinds, r.kind), append(keys, r.key), append(values, r.value)
		}
	}
	stmt, err := st.get(ctx, "sandbox_upsert_batch", sandboxBatchSQL)
	if err == nil {
		_, err = stmt.ExecContext(ctx, systems, kinds, keys, values)
	}
	if err != nil {
		return fmt.Errorf("writing %d sandbox object(s) of %d system(s): %w", n, len(calls), err)
	}
	return nil
}
