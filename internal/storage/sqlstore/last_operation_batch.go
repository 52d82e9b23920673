package sqlstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/jmoiron/sqlx"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Platforms poll last_operation; on PostgreSQL each read is a round trip whose protocol and
// executor start-up cost far more than its two index lookups. Concurrent named reads are
// therefore coalesced: a reader goroutine takes every read that is waiting and answers them
// with one statement. A read that finds a reader idle runs at once (the channel is unbuffered),
// so coalescing adds no latency when there is no queue; under load it turns N round trips into
// one. The answers are the same as one statement per read: each read gets the rows of its own
// operation and instance, from one snapshot.
const (
	lastOpReaders  = 4
	maxLastOpBatch = 128
)

// namedOperationsBatchSQL reads many named operations and their instances' existence: req is
// the read's index in the batch.
const namedOperationsBatchSQL = `SELECT r.req, 0 AS k, o.id, o.instance_id, o.type, o.state, o.description, o.last_error
	FROM unnest(?::text[]) WITH ORDINALITY AS r(id, req) JOIN operations o ON o.id = r.id
	UNION ALL
	SELECT r.req, 2 AS k, i.instance_id, i.instance_id, '', '', '', ''
	FROM unnest(?::text[]) WITH ORDINALITY AS r(instance_id, req) JOIN instances i ON i.instance_id = r.instance_id`

type lastOpReq struct {
	ctx                     context.Context
	instanceID, operationID string
	done                    chan lastOpRes
}

type lastOpRes struct {
	read storage.LastOperationRead
	err  error
}

type lastOpBatcher struct {
	reqs chan *lastOpReq
	quit chan struct{}
	wg   sync.WaitGroup
	stmt *sqlx.Stmt
}

func (s *Store) startLastOpBatcher(ctx context.Context) error {
	stmt, err := s.r.PreparexContext(ctx, s.d.rebind(namedOperationsBatchSQL))
	if err != nil {
		return fmt.Errorf("preparing batched last operation statement: %w", err)
	}
	b := &lastOpBatcher{reqs: make(chan *lastOpReq), quit: make(chan struct{}), stmt: stmt}
	for i := 0; i < lastOpReaders; i++ {
		b.wg.Add(1)
		go s.lastOpReader(b)
	}
	s.lastOps = b
	return nil
}

func (b *lastOpBatcher) stop() error {
	close(b.quit)
	b.wg.Wait()
	return b.stmt.Close()
}

// readNamed hands a named read to a reader and waits for its answer.
func (b *lastOpBatcher) readNamed(ctx context.Context, instanceID, operationID string) (storage.LastOperationRead, error) {
	r := &lastOpReq{ctx: ctx, instanceID: instanceID, operationID: operationID, done: make(chan lastOpRes, 1)}
	select {
	case b.reqs <- r:
	case <-ctx.Done():
		return storage.LastOperationRead{}, ctx.Err()
	case <-b.quit:
		return storage.LastOperationRead{}, fmt.Errorf("store is closed")
	}
	select {
	case res := <-r.done:
		return res.read, res.err
	case <-ctx.Done():
		return storage.LastOperationRead{}, ctx.Err()
	}
}

func (s *Store) lastOpReader(b *lastOpBatcher) {
	defer b.wg.Done()
	for {
		var first *lastOpReq
		select {
		case <-b.quit:
			return
		case first = <-b.reqs:
		}
		batch := []*lastOpReq{first}
	drain:
		for len(batch) < maxLastOpBatch {
			select {
			case r := <-b.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		s.readNamedBatch(b.stmt, batch)
	}
}

// readNamedBatch answers every live read of the batch; a failed statement fails them all (each
// caller reports its own 500; nothing was written).
func (s *Store) readNamedBatch(stmt *sqlx.Stmt, batch []*lastOpReq) {
	live := batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- lastOpRes{err: err}
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	// The batch runs on behalf of every caller: it ends when the last of them gives up.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopAll := make(chan struct{})
	defer close(stopAll)
	go func() {
		for _, r := range live {
			select {
			case <-r.ctx.Done():
			case <-stopAll:
				return
			}
		}
		cancel()
	}()
	reads, err := s.queryNamedBatch(ctx, stmt, live)
	for i, r := range live {
		r.done <- lastOpRes{read: reads[i], err: err}
	}
}

func (s *Store) queryNamedBatch(ctx context.Context, stmt *sqlx.Stmt, live []*lastOpReq) ([]storage.LastOperationRead, error) {
	reads := make([]storage.LastOperationRead, len(live))
	opIDs, instIDs := make([]string, len(live)), make([]string, len(live))
	for i, r := range live {
		opIDs[i], instIDs[i] = r.operationID, r.instanceID
	}
	rows, err := stmt.QueryContext(ctx, s.d.Array(opIDs), s.d.Array(instIDs))
	if err != nil {
		return reads, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			req, k int
			op     storage.OperationStatus
			state  string
		)
		if err := rows.Scan(&req, &k, &op.ID, &op.InstanceID, &op.Type, &state, &op.Description, &op.LastError); err != nil {
			return reads, err
		}
		if req < 1 || req > len(reads) {
			return reads, fmt.Errorf("batched last operation read returned request %d of %d", req, len(reads))
		}
		op.State = storage.OperationState(state)
		if k == 0 {
			reads[req-1].Named = &op
		} else {
			reads[req-1].InstanceExists = true
		}
	}
	return reads, rows.Err()
}
