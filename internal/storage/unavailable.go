package storage

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// ErrUnavailable marks an error as "the database cannot be reached": waiting, not changing the
// request, is what helps. Drivers may wrap errors with it; IsUnavailable also recognises the
// underlying network and server errors of every driver without it.
var ErrUnavailable = errors.New("database unavailable")

// unreachable are the socket errors of a server that is down, restarting or cut off.
var unreachable = []error{
	syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
	syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ETIMEDOUT,
}

// IsUnavailable reports whether err says the database cannot be reached (refused or reset
// connections, a connection database/sql gave up on, PostgreSQL shutting down or starting up,
// connection exceptions), as opposed to an error of the request itself. HTTP handlers answer
// it with 503 and Retry-After.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrUnavailable) || errors.Is(err, sql.ErrConnDone) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	for _, e := range unreachable {
		if errors.Is(err, e) {
			return true
		}
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return true
	}
	// lib/pq's and pgx's errors carry the SQLSTATE; this keeps the storage package free of
	// driver imports.
	var coded interface{ SQLState() string }
	if errors.As(err, &coded) {
		return unavailableState(coded.SQLState())
	}
	return false
}

// unavailableState: class 08 (connection exception), 57P01 admin_shutdown, 57P02
// crash_shutdown, 57P03 cannot_connect_now (starting up or shutting down).
func unavailableState(code string) bool {
	switch code {
	case "57P01", "57P02", "57P03":
		return true
	}
	return strings.HasPrefix(code, "08")
}

// ErrFull marks an error as "the database's storage is full": no write succeeds until space is
// freed; reads still do. IsFull also recognises the drivers' own errors without it.
var ErrFull = errors.New("the database's storage is full")

// IsFull reports whether err says the database cannot write for lack of space: SQLite's
// SQLITE_FULL ("database or disk is full", also at its max_page_count), PostgreSQL's disk_full
// (SQLSTATE 53100), or ENOSPC from the file system.
func IsFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrFull) || errors.Is(err, syscall.ENOSPC) {
		return true
	}
	var coded interface{ SQLState() string }
	if errors.As(err, &coded) && coded.SQLState() == "53100" {
		return true
	}
	// modernc.org/sqlite's error: the primary result code is the low byte (SQLITE_FULL is 13).
	var sqliteErr interface{ Code() int }
	if errors.As(err, &sqliteErr) && sqliteErr.Code()&0xff == 13 {
		return true
	}
	return strings.Contains(err.Error(), "database or disk is full")
}

// IsCanceled reports whether err is a request's own end (its context cancelled, its deadline
// passed, or PostgreSQL cancelling the statement for it: SQLSTATE 57014), not a database fault.
func IsCanceled(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var coded interface{ SQLState() string }
	return errors.As(err, &coded) && coded.SQLState() == "57014"
}
