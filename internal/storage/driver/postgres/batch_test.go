package postgres

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

// TestSessionsAreSet: every session of a pool with settings has them, also one opened after
// another was lost.
func TestSessionsAreSet(t *testing.T) {
	ctx := context.Background()
	db, err := connectWith(ctx, Config{URL: pgtest.NewDatabase(t)}, batchConns, planOnce)
	require.NoError(t, err)
	defer db.Close()
	conns := make([]interface{ Close() error }, 0, batchConns)
	for i := 0; i < batchConns; i++ {
		c, err := db.Connx(ctx)
		require.NoError(t, err)
		conns = append(conns, c)
		var mode string
		require.NoError(t, c.QueryRowxContext(ctx, "SHOW plan_cache_mode").Scan(&mode))
		require.Equal(t, "force_generic_plan", mode, "session %d", i)
		if i == 0 {
			// A session that ends (a restart, a network cut) is replaced by a new one.
			_, err := c.ExecContext(ctx, "SELECT pg_terminate_backend(pg_backend_pid())")
			require.Error(t, err)
		}
	}
	for _, c := range conns {
		_ = c.Close()
	}
	var mode string
	require.NoError(t, db.QueryRowxContext(ctx, "SHOW plan_cache_mode").Scan(&mode))
	require.Equal(t, "force_generic_plan", mode)

	// The store's other pool keeps PostgreSQL's default.
	other, err := connect(ctx, Config{URL: pgtest.NewDatabase(t)})
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, other.QueryRowxContext(ctx, "SHOW plan_cache_mode").Scan(&mode))
	require.Equal(t, "auto", mode)
}

// TestClaimAndUnflushedSessions: the claim pool's sessions neither sort nor wait for their
// commits' WAL flush; the unflushed pool's do not wait either; the writer's keep PostgreSQL's
// defaults (its commits, the operations' saves among them, are flushed).
func TestClaimAndUnflushedSessions(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	show := func(db interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}, name string) string {
		var v string
		require.NoError(t, db.QueryRowContext(ctx, "SHOW "+name).Scan(&v))
		return v
	}
	claims, err := connectWith(ctx, Config{URL: url}, claimConns, readInOrder)
	require.NoError(t, err)
	defer claims.Close()
	require.Equal(t, "off", show(claims, "enable_sort"))
	require.Equal(t, "off", show(claims, "synchronous_commit"))

	unflushed, err := connectWith(ctx, Config{URL: url}, unflushedConns, noFlushWait)
	require.NoError(t, err)
	defer unflushed.Close()
	require.Equal(t, "on", show(unflushed, "enable_sort"))
	require.Equal(t, "off", show(unflushed, "synchronous_commit"))

	writer, err := connect(ctx, Config{URL: url})
	require.NoError(t, err)
	defer writer.Close()
	require.Equal(t, "on", show(writer, "synchronous_commit"))
}
