package storage_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/lib/pq"
	"github.com/stretchr/testify/assert"
)

func TestIsUnavailable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"nil":                      {nil, false},
		"marked":                   {fmt.Errorf("reading: %w", storage.ErrUnavailable), true},
		"connection refused":       {fmt.Errorf("connecting to postgres: %w", refused), true},
		"connection reset":         {fmt.Errorf("reading: %w", syscall.ECONNRESET), true},
		"read on a closed socket":  {&net.OpError{Op: "read", Net: "tcp", Err: errors.New("use of closed network connection")}, true},
		"connection done":          {fmt.Errorf("committing: %w", sql.ErrConnDone), true},
		"bad connection":           {fmt.Errorf("claiming: %w", driver.ErrBadConn), true},
		"admin shutdown":           {&pq.Error{Code: "57P01"}, true},
		"crash shutdown":           {&pq.Error{Code: "57P02"}, true},
		"starting up":              {fmt.Errorf("listing: %w", &pq.Error{Code: "57P03"}), true},
		"connection failure":       {&pq.Error{Code: "08006"}, true},
		"unique violation":         {&pq.Error{Code: "23505"}, false},
		"query canceled":           {&pq.Error{Code: "57014"}, false},
		"not found":                {fmt.Errorf("instance x: %w", storage.ErrNotFound), false},
		"conflict":                 {storage.ErrConflict, false},
		"context canceled":         {context.Canceled, false},
		"a request's own mistakes": {errors.New("invalid input syntax"), false},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, storage.IsUnavailable(tc.err), "%v", tc.err)
		})
	}
}
