package durablesql

import (
	"context"
	"database/sql"
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

// defaultClaimCheck is how often a held claim's connection is checked: a database restart ends
// the session, and the lock with it, while the sandbox goes on serving.
const defaultClaimCheck = 5 * time.Second

// TryClaim implements durable.Claimer. On PostgreSQL the claim is held on a connection of its
// own for as long as it is held, checked every claimCheck and taken again when that connection
// broke (a database restart); a SQLite file is the sandbox's own (cmd/sandbox) or the broker's
// (one process), so there it always succeeds.
func (o *Objects) TryClaim(ctx context.Context) (func(), bool, error) {
	if o.d.Name != "postgres" {
		return func() {}, true, nil
	}
	conn, ok, err := o.lock(ctx)
	if err != nil || !ok {
		return nil, ok, err
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		conn = o.keepClaim(conn, stop)
	}()
	return func() {
		close(stop)
		<-done
		if conn != nil {
			o.unlock(conn)
		}
	}, true, nil
}

// lock takes the claim on a new connection, which it returns when it got it.
func (o *Objects) lock(ctx context.Context) (*sql.Conn, bool, error) {
	conn, err := o.db.Conn(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("claiming the database for the sandbox: %w", err)
	}
	var ok bool
	if err := conn.QueryRowContext(ctx, claimLockSQL).Scan(&ok); err != nil {
		discard(conn)
		return nil, false, fmt.Errorf("claiming the database for the sandbox: %w", err)
	}
	if !ok {
		_ = conn.Close()
		return nil, false, nil
	}
	return conn, true, nil
}

// keepClaim checks the claim's connection until stop and takes the claim again when it broke;
// it returns the connection holding the claim then (nil: none).
func (o *Objects) keepClaim(conn *sql.Conn, stop <-chan struct{}) *sql.Conn {
	t := time.NewTicker(o.claimCheck)
	defer t.Stop()
	lost := false // logged that another sandbox holds the claim
	for {
		select {
		case <-stop:
			return conn
		case <-t.C:
		}
		// Not the check's interval: a claim taken after its caller gave up would linger.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if conn != nil {
			if err := conn.PingContext(ctx); err != nil {
				o.log.WithError(err).Warn("the sandbox's claim on the database went with its connection; taking it again")
				discard(conn)
				conn = nil
			}
		}
		if conn == nil {
			// The database may still be down: tried again at the next check.
			if c, ok, err := o.lock(ctx); err == nil {
				switch {
				case ok:
					conn, lost = c, false
					o.log.Info("the sandbox holds its claim on the database again")
				case !lost:
					lost = true
					o.log.Error("another sandbox took the database while this one's claim was lost: both serve from it, and they diverge")
				}
			}
		}
		cancel()
	}
}

// unlock gives the claim back and the connection to the pool.
func (o *Objects) unlock(conn *sql.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var unlocked bool
	if err := conn.QueryRowContext(ctx, claimUnlockSQL).Scan(&unlocked); err != nil || !unlocked {
		// The session may still hold the lock: the connection must not go back to the pool.
		discard(conn)
		return
	}
	_ = conn.Close()
}

// discard closes the connection instead of returning it to the pool.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}
