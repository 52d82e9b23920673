package sqlstore

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// The stand-ins group-commit their writes each on its own (sandbox.Durable), so six of them
// wrote six transactions where one would do: on PostgreSQL, concurrent writes of the
// systems' rows (no deletes) are coalesced into one upsert, one commit. Each system has at
// most one write in flight (Durable writes its batches in order), so a statement never holds
// one row twice; should two calls of one system meet anyway, the later is written after, on
// its own. A failed statement is retried call by call, so a stand-in's bad row fails only
// its own write.
const (
	sandboxWriters      = 1
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

type sandboxBatch = []*pending[sandboxWrite, struct{}]

// startWriter starts coalescing the upserts onto db (the store's unflushed sessions,
// Config.UnflushedDB: a stand-in's object is flushed by the save that records it).
func (o *SandboxObjects) startWriter(db *stmtCache) {
	o.writes = startCoalescer(sandboxWriters, maxSandboxBatch, func(calls sandboxBatch) { o.writeBatch(db, calls) })
}

func (o *SandboxObjects) stopWriter() {
	if o.writes != nil {
		o.writes.stop()
	}
}

// writeBatch writes the calls in one statement where it can and answers each.
func (o *SandboxObjects) writeBatch(db *stmtCache, calls sandboxBatch) {
	ctx, cancel := context.WithTimeout(context.Background(), sandboxWriteTimeout)
	defer cancel()
	now, later := firstOfEach(calls, func(w sandboxWrite) string { return w.system })
	if err := o.upsertAll(ctx, db, now); err != nil && len(now) > 1 {
		for _, c := range now {
			c.answer(struct{}{}, o.upsertAll(ctx, db, sandboxBatch{c}))
		}
	} else {
		for _, c := range now {
			c.answer(struct{}{}, err)
		}
	}
	for _, c := range later {
		c.answer(struct{}{}, o.upsertAll(ctx, db, sandboxBatch{c}))
	}
}

// upsertAll writes the rows of calls (distinct systems) in one statement, in (system, kind,
// key) order: concurrent writers lock rows in one order.
func (o *SandboxObjects) upsertAll(ctx context.Context, db *stmtCache, calls sandboxBatch) error {
	sorted := append(sandboxBatch(nil), calls...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].req.system < sorted[j].req.system })
	n := 0
	for _, c := range sorted {
		n += len(c.req.rows)
	}
	// The values go into the array as they are (no string copy of each document).
	systems, kinds, keys, values := make(pgTextArray, 0, n), make(pgTextArray, 0, n), make(pgTextArray, 0, n), make(pgByteTextArray, 0, n)
	for _, c := range sorted {
		for _, r := range c.req.rows {
			systems, kinds, keys, values = append(systems, c.req.system), append(kinds, r.kind), append(keys, r.key), append(values, r.value)
		}
	}
	st, err := db.byName(ctx, "sandbox_upsert_batch", func() string { return o.d.rebind(sandboxBatchSQL) })
	if err == nil {
		_, err = st.ExecContext(ctx, systems, kinds, keys, values)
	}
	if err != nil {
		return fmt.Errorf("writing %d sandbox object(s) of %d system(s): %w", n, len(calls), err)
	}
	return nil
}
