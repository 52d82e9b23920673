// Package sqlstore is the database/sql implementation of storage.Store shared by the PostgreSQL
// and SQLite drivers. What differs between them is described by a Dialect.
package sqlstore

import (
	"context"
	"database/sql/driver"
	"fmt"
	"strconv"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/jmoiron/sqlx"
)

// Dialect is what the shared implementation needs to know about one database.
type Dialect struct {
	// Name is the driver name used in messages ("postgres", "sqlite").
	Name string
	// Placeholder is how squirrel renders bind parameters; BindType is the same for sqlx.Rebind.
	Placeholder sq.PlaceholderFormat
	BindType    int
	// TimeAsMicros stores times as INTEGER unix microseconds (SQLite) instead of timestamptz.
	TimeAsMicros bool
	// TimestampType is the column type of schema_migrations.applied_at.
	TimestampType string
	// SkipLocked adds FOR UPDATE SKIP LOCKED to the claim sub-query (PostgreSQL). Without it the
	// driver must serialise writes (SQLite: a single writer connection).
	SkipLocked bool
	// Array, when set, wraps a Go slice as one array parameter (pq.Array). SaveProgress then
	// writes the operation and its events in one statement (a CTE with unnest).
	Array func(any) any
	// IsUniqueViolation reports whether err is a primary key / unique constraint violation.
	IsUniqueViolation func(error) bool
	// Notify, when set, is the statement that wakes other processes (pg_notify), with one bind
	// parameter: the notifying store's ID, which its own listener ignores. It runs after the
	// writes that made operations due (InsertOperation, ReleaseLeases, a wake and the like),
	// coalesced (see notifier).
	Notify string
	// WritableCTE: the database runs data-modifying statements in WITH (PostgreSQL). A row and
	// its first operation are then inserted in one statement.
	WritableCTE bool
	// Listen, when set, delivers a value whenever another process called Notify (a store other
	// than the one named ignore); the channel is closed when ctx ends. It is used by
	// Store.Wakeups in addition to in-process broadcasts.
	Listen func(ctx context.Context, ignore string) (<-chan struct{}, error)
	// XactLockSQL, when set, takes a lock on a text key (its one bind parameter) that is held
	// until the end of the transaction (pg_advisory_xact_lock). Without it the driver must
	// serialise write transactions (SQLite: a single writer connection).
	XactLockSQL string
	// LeaseLockSQL, RenewLockSQL and ReleaseLockSQL, when set, take, renew and release a leased
	// singleton lock, a row of singleton_leases (parameters: name, holder, lease in
	// milliseconds; the expiry is on the database's clock): singletons across replicas. Without
	// them the lock is held in the process (SQLite: one process anyway).
	LeaseLockSQL, RenewLockSQL, ReleaseLockSQL string
	// ByteOrder, when set, follows a text expression to compare it byte by byte (COLLATE "C"), as an
	// index on that expression is ordered; empty when the default collation already is (SQLite's
	// BINARY). Key ranges then mean prefixes whatever the database's collation.
	ByteOrder string
	// JSONCast, when set, follows a text expression to read it as JSON for the -> operator
	// (::json); empty where -> reads JSON text itself (SQLite).
	JSONCast string
	// LocalReads: a read is of a local file and takes microseconds (SQLite, WAL: never behind a
	// writer); making it cancellable costs more than the read (two watcher goroutines per
	// statement), so the hottest reads run to their end.
	LocalReads bool
}

func (d Dialect) rebind(q string) string { return sqlx.Rebind(d.BindType, q) }

// timeArg is how a time is written as a bind parameter: UTC, truncated to microseconds.
func (d Dialect) timeArg(t time.Time) any {
	t = t.UTC().Truncate(time.Microsecond)
	if d.TimeAsMicros {
		return t.UnixMicro()
	}
	return t
}

// nullTimeArg writes nil as NULL.
func (d Dialect) nullTimeArg(t *time.Time) any {
	if t == nil {
		return nil
	}
	return d.timeArg(*t)
}

// zeroNullTimeArg writes the zero time as NULL.
func (d Dialect) zeroNullTimeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return d.timeArg(t)
}

// dbTime scans a time stored as timestamptz (time.Time), unix microseconds (int64) or NULL.
// Scanned times are UTC and truncated to microseconds.
type dbTime struct {
	Time  time.Time
	Valid bool
}

var _ interface{ Scan(any) error } = (*dbTime)(nil)

func (t *dbTime) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		*t = dbTime{}
	case int64:
		*t = dbTime{Time: time.UnixMicro(x).UTC(), Valid: true}
	case float64:
		*t = dbTime{Time: time.UnixMicro(int64(x)).UTC(), Valid: true}
	case time.Time:
		*t = dbTime{Time: x.UTC().Truncate(time.Microsecond), Valid: true}
	case []byte:
		return t.parse(string(x))
	case string:
		return t.parse(x)
	default:
		return fmt.Errorf("cannot scan %T into a time", v)
	}
	return nil
}

func (t *dbTime) parse(s string) error {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		*t = dbTime{Time: time.UnixMicro(n).UTC(), Valid: true}
		return nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999-07:00", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999"} {
		if v, err := time.Parse(layout, s); err == nil {
			*t = dbTime{Time: v.UTC().Truncate(time.Microsecond), Valid: true}
			return nil
		}
	}
	return fmt.Errorf("cannot parse time %q", s)
}

func (t dbTime) ptr() *time.Time {
	if !t.Valid {
		return nil
	}
	v := t.Time
	return &v
}

// value returns the zero time for NULL.
func (t dbTime) value() time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time
}

// nullString writes "" as NULL.
func nullString(s string) driver.Value {
	if s == "" {
		return nil
	}
	return s
}

// nullJSON writes an empty document as NULL.
func nullJSON(b []byte) driver.Value {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
