package durablesql_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/director"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durablesql"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver/postgres"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/storagetest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

const claimTenant = "3e64ebae-38b5-46a0-b1ed-9ccee153a0ae"

// process opens the sandbox's objects in the database url on a store of their own, as a broker
// replica does.
func process(t *testing.T, url, key string) *durablesql.Objects {
	t.Helper()
	s, err := postgres.Open(context.Background(), postgres.Config{URL: url, MaxOpenConns: 5}, storagetest.Keyring(t, key), nil)
	require.NoError(t, err)
	o, err := durablesql.Open(context.Background(), s.Database(), nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, o.Close())
		assert.NoError(t, s.Close())
	})
	return o
}

func listen(ctx context.Context, o *durablesql.Objects, log logrus.FieldLogger, wait time.Duration) (*standins.Listeners, error) {
	return standins.Listen(ctx, standins.Options{Log: log, Seed: 1, Store: o, ClaimWait: wait}, "127.0.0.1:0", "127.0.0.1:0")
}

func shutdown(t *testing.T, l *standins.Listeners) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, l.Shutdown(ctx))
}

func directorOf(t *testing.T, l *standins.Listeners) *director.Client {
	c := standins.DefaultCredentials()
	cl, err := director.New(director.Config{URL: l.URL + "/director/graphql", OAuthTokenURL: l.URL + "/director/oauth/token",
		OAuthClientID: c.DirectorClientID, OAuthClientSecret: c.DirectorClientSecret, Timeout: 5 * time.Second})
	require.NoError(t, err)
	return cl
}

// Two broker replicas each embedding a sandbox on one database were two Directors: the second
// cached the first's runtime as absent, so a runtime registered through one replica was "not
// found" when the other requested its one-time token. A second sandbox now waits until the first
// has stopped and then serves what the first wrote: the Director is one service.
func TestASecondSandboxOnTheDatabaseWaitsForTheFirst(t *testing.T) {
	ctx := context.Background()
	url, key := pgtest.NewDatabase(t), storagetest.Key(t)
	a, err := listen(ctx, process(t, url, key), nil, 0)
	require.NoError(t, err)
	stoppedA := false
	t.Cleanup(func() {
		if !stoppedA {
			shutdown(t, a)
		}
	})
	compassID, err := directorOf(t, a).RegisterRuntime(ctx, claimTenant, "rt-claim", "claim", "", nil)
	require.NoError(t, err)

	log, hook := logtest.NewNullLogger()
	type started struct {
		l   *standins.Listeners
		err error
	}
	second := make(chan started, 1)
	objects := process(t, url, key)
	go func() {
		l, err := listen(ctx, objects, log, 2*time.Minute)
		second <- started{l, err}
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		waiting := false
		for _, e := range hook.AllEntries() {
			waiting = waiting || strings.Contains(e.Message, "another sandbox serves from this database")
		}
		if waiting {
			break
		}
		select {
		case s := <-second:
			require.Fail(t, "the second sandbox started while the first serves from the database", "error: %v", s.err)
		default:
		}
		require.True(t, time.Now().Before(deadline), "the second sandbox neither waited nor started")
	}
	// Still served by the first alone: a token issued through it, then it stops.
	_, err = directorOf(t, a).RequestOneTimeToken(ctx, claimTenant, compassID)
	require.NoError(t, err)
	shutdown(t, a)
	stoppedA = true

	var b started
	select {
	case b = <-second:
	case <-time.After(30 * time.Second):
		require.Fail(t, "the second sandbox did not start after the first stopped")
	}
	require.NoError(t, b.err)
	t.Cleanup(func() { shutdown(t, b.l) })
	cl := directorOf(t, b.l)
	tok, err := cl.RequestOneTimeToken(ctx, claimTenant, compassID)
	require.NoError(t, err, "the runtime registered through the first sandbox")
	assert.NotEmpty(t, tok.Token)
	again, err := cl.RegisterRuntime(ctx, claimTenant, "rt-claim", "claim", "", nil)
	require.NoError(t, err)
	assert.Equal(t, compassID, again, "found, not registered again")
	snap := b.l.Director.Snapshot()
	assert.Equal(t, 1, snap.RegistrationsByRuntimeID["rt-claim"])
	require.Len(t, snap.Tenants[claimTenant], 1)
	assert.Equal(t, 2, snap.Tenants[claimTenant][0].TokensIssued)
	assert.Equal(t, 1, snap.Tenants[claimTenant][0].ValidTokens, "the first sandbox's token revoked")
}

// A second sandbox that the first does not make way for within its wait does not start.
func TestASecondSandboxGivesUpWhileTheFirstServes(t *testing.T) {
	ctx := context.Background()
	url, key := pgtest.NewDatabase(t), storagetest.Key(t)
	a, err := listen(ctx, process(t, url, key), nil, 0)
	require.NoError(t, err)
	t.Cleanup(func() { shutdown(t, a) })
	_, err = listen(ctx, process(t, url, key), nil, 300*time.Millisecond)
	require.Error(t, err)
	assert.True(t, errors.Is(err, standins.ErrStoreClaimed), "%v", err)
	assert.Contains(t, err.Error(), "APP_SANDBOX_URL")
}
