package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"
)

// Read connections are query-only and keep a larger page cache than the writer.
func TestReadConnectionSettings(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keb.db")
	w, err := openWriter(ctx, Config{Path: path})
	require.NoError(t, err)
	defer w.Close()
	r, err := sqlx.Open("sqlite", dsn(path, true))
	require.NoError(t, err)
	defer r.Close()
	pragma := func(db *sqlx.DB, name string) int {
		var v int
		require.NoError(t, db.GetContext(ctx, &v, "PRAGMA "+name))
		return v
	}
	require.Equal(t, -readCacheKiB, pragma(r, "cache_size"))
	require.Equal(t, 1, pragma(r, "query_only"))
	require.Equal(t, 0, pragma(w, "query_only"))
	require.Greater(t, pragma(w, "cache_size"), -readCacheKiB, "the writer keeps SQLite's default")
}
