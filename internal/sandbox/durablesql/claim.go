package durablesql

import (
	"context"
	"database/sql/driver"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
)

var _ durable.Claimer = (*Objects)(nil)

// claimLockSQL takes the session advisory lock that says a sandbox serves from this database.
// A session lock, not a row: it goes with the holder's connection when the holder dies (kill -9),
// and stays while a stopped holder (SIGSTOP) keeps its connection, which is right, as that holder
// still caches the state it would answer from when resumed.
const claimLockSQL = "SELECT pg_try_advisory_lock(hashtext('kyma-environment-broker/sandbox'))"

const claimUnlockSQL = "SELECT pg_advisory_unlock(hashtext('kyma-environment-broker/sandbox'))"

// TryClaim implements durable.Claimer. On PostgreSQL the claim is held on a connection of its
// own for as long as it is held; a SQLite file is the sandbox's own (cmd/sandbox) or the broker's
// (one process), so there it always succeeds.
func (o *Objects) TryClaim(ctx context.Context) (func(), bool, error) {
	if o.d.Name != "postgres" {
		return func() {}, true, nil
	}
	conn, err := o.db.Conn(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("claiming the database for the sandbox: %w", err)
	}
	var ok bool
	if err := conn.QueryRowContext(ctx, claimLockSQL).Scan(&ok); err != nil {
		_ = conn.Close()
		return nil, false, fmt.Errorf("claiming the database for the sandbox: %w", err)
	}
	if !ok {
		_ = conn.Close()
		return nil, false, nil
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var unlocked bool
		if err := conn.QueryRowContext(ctx, claimUnlockSQL).Scan(&unlocked); err != nil || !unlocked {
			// The session may still hold the lock: the connection must not go back to the pool.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		_ = conn.Close()
	}, true, nil
}
