package lifecycle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/storagetest"
)

// TestPeriodicOneAtATime: a round runs only while its lock is free (another replica holding
// it skips the round), and a failed round leaves the next one to try again.
func TestPeriodicOneAtATime(t *testing.T) {
	store := storagetest.OpenSQLite(t)
	rounds := 0
	p := Periodic{Store: store, Name: "expiry", Interval: time.Minute, Log: steptest.Log(), Round: func(ctx context.Context) error {
		rounds++
		_, ok, err := store.TryLock(ctx, "keb-job:expiry")
		require.NoError(t, err)
		assert.False(t, ok, "the round holds the lock")
		return errors.New("EDP: 503")
	}}
	other, ok, err := store.TryLock(context.Background(), "keb-job:expiry")
	require.NoError(t, err)
	require.True(t, ok)
	p.once(context.Background())
	assert.Zero(t, rounds, "another replica holds the lock")
	other.Release()
	p.once(context.Background())
	p.once(context.Background())
	assert.Equal(t, 2, rounds, "a failed round does not stop the next")
}

func TestConfigValidate(t *testing.T) {
	assert.NoError(t, Config{ExpiryInterval: time.Hour, RetriggerInterval: 10 * time.Minute, RetriggerMaxAge: 72 * time.Hour}.Validate())
	assert.ErrorContains(t, Config{RetriggerInterval: time.Hour, RetriggerMaxAge: time.Minute}.Validate(), "APP_LIFECYCLE_RETRIGGER_MAX_AGE")
	assert.ErrorContains(t, Config{ExpiryInterval: -time.Second}.Validate(), "must not be negative")
	assert.NoError(t, Config{}.Validate(), "both jobs off")
}
