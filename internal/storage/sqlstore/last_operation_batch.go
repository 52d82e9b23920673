package sqlstore

import (
	"context"
	"fmt"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Platforms poll last_operation; on PostgreSQL each read is a round trip whose protocol and
// executor start-up cost far more than its two index lookups. Concurrent named reads are
// therefore coalesced (coalescer: an idle reader runs a read at once, a busy one's queue is
// answered by one statement). The answers are the same as one statement per read: each read
// gets the rows of its own operation and instance, from one snapshot.
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

// lastOpCall is one named last_operation read waiting for its answer.
type lastOpCall struct{ instanceID, operationID string }

type lastOpBatch = []*pending[lastOpCall, storage.LastOperationRead]

func (s *Store) startLastOpBatcher(ctx context.Context) error {
	stmt, err := s.batch.PreparexContext(ctx, s.d.rebind(namedOperationsBatchSQL))
	if err != nil {
		return fmt.Errorf("preparing batched last operation statement: %w", err)
	}
	s.lastOpBatchStmt = stmt
	s.lastOps = startCoalescer(lastOpReaders, maxLastOpBatch, s.readNamedBatch)
	return nil
}

// readNamedBatch answers every read of the batch; a failed statement fails them all (each
// caller reports its own 500; nothing was written).
func (s *Store) readNamedBatch(batch lastOpBatch) {
	// The statement runs on behalf of every caller: it ends when the last of them gives up.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopWatching := make(chan struct{})
	defer close(stopWatching)
	go func() {
		for _, c := range batch {
			select {
			case <-c.ctx.Done():
			case <-stopWatching:
				return
			}
		}
		cancel()
	}()
	reads, err := s.queryNamedBatch(ctx, batch)
	for i, c := range batch {
		c.answer(reads[i], err)
	}
}

func (s *Store) queryNamedBatch(ctx context.Context, batch lastOpBatch) ([]storage.LastOperationRead, error) {
	reads := make([]storage.LastOperationRead, len(batch))
	opIDs, instIDs := make([]string, len(batch)), make([]string, len(batch))
	for i, c := range batch {
		opIDs[i], instIDs[i] = c.req.operationID, c.req.instanceID
	}
	rows, err := s.lastOpBatchStmt.QueryContext(ctx, s.d.Array(opIDs), s.d.Array(instIDs))
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
