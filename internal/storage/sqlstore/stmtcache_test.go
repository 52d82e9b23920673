package sqlstore

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"
)

// TestStmtCache: a text is prepared once however many callers race for it; beyond the bound a
// text runs unprepared, with the same answer.
func TestStmtCache(t *testing.T) {
	db, err := sqlx.Open("sqlite", filepath.Join(t.TempDir(), "c.db"))
	require.NoError(t, err)
	defer db.Close()
	ctx := context.Background()
	c := newStmtCache(db)
	defer c.close()

	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var n int
			require.NoError(t, c.queryRowx(ctx, "SELECT ? + 1", 41).Scan(&n))
			require.Equal(t, 42, n)
		}()
	}
	wg.Wait()
	require.Len(t, c.texts, 1)

	for i := 0; i < maxCachedStmts+5; i++ {
		var got int
		require.NoError(t, c.queryRowx(ctx, fmt.Sprintf("SELECT ? + %d", i), 1).Scan(&got))
		require.Equal(t, i+1, got)
	}
	require.Len(t, c.texts, maxCachedStmts, "bounded")
	st, err := c.stmt(ctx, "SELECT 'beyond the bound'")
	require.NoError(t, err)
	require.Nil(t, st)
}
