package sqlstore

import (
	"context"
	"github.com/kyma-project/kyma-environment-broker/internal/observe"

	"github.com/jmoiron/sqlx"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// insertWithFirstOperation inserts a row (parentSQL: its INSERT returning its columns, with ?
// placeholders; scanParent scans them) and its first operation atomically, then wakes the
// engines here and on other replicas (Store.notify, after the commit), or, when a taker of
// this process kept a worker for the operation, inserts it leased and hands it to that worker.
// On PostgreSQL the insert is one prepared statement: a transaction took seven round trips,
// twice per provisioning. With check, both are inserted in a transaction after check passed in
// it. An existing row or operation is storage.ErrAlreadyExists, and then nothing is written.
func insertWithFirstOperation[P any](ctx context.Context, s *Store, parentSQL string, parentArgs []any, op storage.Operation,
	scanParent func(rowScanner) (P, error), check func(*sqlx.Tx) error) (_ P, _ storage.Operation, err error) {
	var parent P
	res, taken := s.takers.reserve(op)
	if taken {
		until := res.LeaseUntil
		op.LeaseOwner, op.LeaseExpiresAt, op.DueAt = res.Owner, &until, &until
		defer func() {
			if err != nil {
				res.Cancel() // the kept worker goes back
			}
		}()
	}
	observe.LinkOperation(ctx, op.ID) // as insertOperation
	opSQL, opArgs, err := s.operationInsert(op)
	if err != nil {
		return parent, storage.Operation{}, err
	}
	scan := func(r rowScanner) (err error) {
		parent, err = scanParent(r)
		return err
	}
	var out storage.Operation
	oneStatement := s.d.WritableCTE && check == nil
	if oneStatement {
		out, err = s.insertFirstInOneStatement(ctx, parentSQL, parentArgs, opSQL, opArgs, scan)
	} else {
		out, err = s.insertFirstInTx(ctx, parentSQL, parentArgs, opSQL, opArgs, scan, check)
	}
	if err != nil {
		var zero P
		if s.d.IsUniqueViolation(err) {
			err = storage.ErrAlreadyExists
		}
		return zero, storage.Operation{}, err
	}
	if taken {
		// Leased to a worker of this process: no engine has anything to claim.
		res.Take(detached(out))
		return parent, out, nil
	}
	s.notify(ctx)
	return parent, out, nil
}

func (s *Store) insertFirstInOneStatement(ctx context.Context, parentSQL string, parentArgs []any, opSQL string, opArgs []any, scanParent func(rowScanner) error) (storage.Operation, error) {
	var row operationRow
	rest := row.dest()
	q := "WITH p AS (" + parentSQL + "), o AS (" + opSQL + ") SELECT p.*, o.* FROM p CROSS JOIN o"
	args := append(append(make([]any, 0, len(parentArgs)+len(opArgs)), parentArgs...), opArgs...)
	if err := scanParent(followedBy{s.writes.queryRowx(ctx, s.d.rebind(q), args...), rest}); err != nil {
		return storage.Operation{}, err
	}
	return s.operation(&row)
}

func (s *Store) insertFirstInTx(ctx context.Context, parentSQL string, parentArgs []any, opSQL string, opArgs []any, scanParent func(rowScanner) error, check func(*sqlx.Tx) error) (storage.Operation, error) {
	tx, err := s.w.BeginTxx(ctx, nil)
	if err != nil {
		return storage.Operation{}, err
	}
	defer rollback(tx)
	if check != nil {
		if err := check(tx); err != nil {
			return storage.Operation{}, err
		}
	}
	if err := scanParent(tx.QueryRowxContext(ctx, s.d.rebind(parentSQL), parentArgs...)); err != nil {
		return storage.Operation{}, err
	}
	out, err := s.scanOperation(tx.QueryRowxContext(ctx, s.d.rebind(opSQL), opArgs...))
	if err != nil {
		return storage.Operation{}, err
	}
	return out, tx.Commit()
}

// followedBy scans a row whose first columns its caller's destinations take, and the rest into
// more.
type followedBy struct {
	r    rowScanner
	more []any
}

func (f followedBy) Scan(dest ...any) error { return f.r.Scan(append(dest, f.more...)...) }
