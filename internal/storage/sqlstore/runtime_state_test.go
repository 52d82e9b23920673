package sqlstore

import (
	"os"
	"path/filepath"
	"testing"

	sq "github.com/Masterminds/squirrel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// runtimeStateStatements renders the statements runtimeStateSQL is part of with each dialect's
// placeholders: FindRuntimes filtering and sorting by state, and CountRuntimes.
func runtimeStateStatements(t *testing.T) map[string]string {
	t.Helper()
	order, err := runtimeOrder(storage.SortState, true)
	require.NoError(t, err)
	out := map[string]string{"runtime_state.sql": runtimeStateSQL + "\n"}
	for name, ph := range map[string]sq.PlaceholderFormat{"postgres": sq.Dollar, "sqlite": sq.Question} {
		q, _, err := sq.Select(instanceCols + runtimeExtraCols + runtimeStateSQL).From("instances").
			Where(sq.Eq{"(" + runtimeStateSQL + ")": []string{storage.RuntimeFailed, storage.RuntimeProvisioned}}).
			OrderBy(order...).PlaceholderFormat(ph).ToSql()
		require.NoError(t, err)
		out["find_runtimes_"+name+".sql"] = q + "\n"
	}
	return out
}

// TestRuntimeStateSQLPinned pins the runtime state expression and the statements around it, byte
// for byte, to what the positional fmt.Sprintf generated before it became named pieces.
func TestRuntimeStateSQLPinned(t *testing.T) {
	for file, got := range runtimeStateStatements(t) {
		want, err := os.ReadFile(filepath.Join("testdata", file))
		require.NoError(t, err)
		assert.Equal(t, string(want), got, file)
	}
}
