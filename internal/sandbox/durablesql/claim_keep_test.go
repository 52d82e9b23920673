package durablesql

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// claimHolders are the backends holding the sandbox's claim in the database.
const claimHolders = `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
	AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND objid = (hashtext('kyma-environment-broker/sandbox')::bigint & 4294967295)::oid`

// A claim whose connection breaks (a database restart ends every session) is taken again, so a
// second sandbox still cannot start beside the first.
func TestAClaimLostWithItsConnectionIsTakenAgain(t *testing.T) {
	ctx := context.Background()
	env := postgresEnv(t)
	first, other := env.open(t), env.open(t)
	first.claimCheck = 20 * time.Millisecond
	release, ok, err := first.TryClaim(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	defer func() {
		if release != nil {
			release()
		}
	}()

	var holders []int
	require.NoError(t, other.db.SelectContext(ctx, &holders, claimHolders))
	require.Len(t, holders, 1)
	_, err = other.db.ExecContext(ctx, "SELECT pg_terminate_backend($1)", holders[0])
	require.NoError(t, err)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var now []int
		require.NoError(t, other.db.SelectContext(ctx, &now, claimHolders))
		if len(now) == 1 && now[0] != holders[0] {
			break
		}
		require.True(t, time.Now().Before(deadline), "the claim was not taken again: holders %v", now)
	}
	_, ok, err = other.TryClaim(ctx)
	require.NoError(t, err)
	assert.False(t, ok, "the first sandbox holds the claim again")

	release()
	release = nil
	again, ok, err := other.TryClaim(ctx)
	require.NoError(t, err)
	require.True(t, ok, "given back")
	again()
}
