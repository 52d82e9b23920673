package engine

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failingClaims is the real store whose claims fail while failing is set (a full disk).
type failingClaims struct {
	storage.Operations
	failing  atomic.Bool
	attempts atomic.Int64
}

func (o *failingClaims) ClaimOperations(ctx context.Context, req storage.ClaimRequest) ([]storage.Operation, error) {
	if o.failing.Load() {
		o.attempts.Add(1)
		return nil, errors.New("database or disk is full (SQLITE_FULL)")
	}
	return o.Operations.ClaimOperations(ctx, req)
}

type claimStore struct {
	storage.Store
	ops *failingClaims
}

func (s claimStore) Operations() storage.Operations { return s.ops }

// While every claim fails (the storage is full), the claim loop backs off instead of retrying
// at once: a few attempts in seconds, not dozens a second, one log line for the failure, and
// one when claims work again, after which the waiting operation runs.
func TestTheClaimLoopBacksOffOnStorageErrors(t *testing.T) {
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(step("x", nil))}})
	require.NoError(t, err)
	store := newStore(t)
	ops := &failingClaims{Operations: store.Operations()}
	ops.failing.Store(true)
	log, hook := logtest.NewNullLogger()
	eng, err := New(claimStore{Store: store, ops: ops}, Config{Workers: 2, PollInterval: 10 * time.Millisecond}, log)
	require.NoError(t, err)
	require.NoError(t, eng.Register(p))
	testenv.Background(t, eng.Run)
	// Wake-ups keep coming (new operations), as they do while writes fail.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		insertNow(t, store, "provision")
	}
	attempts := ops.attempts.Load()
	lines := func(msg string) int {
		n := 0
		for _, e := range hook.AllEntries() {
			if strings.Contains(e.Message, msg) {
				n++
			}
		}
		return n
	}
	t.Logf("%d claims in 3 s of failing storage, %d log lines", attempts, len(hook.AllEntries()))
	// 0.1 s doubling (jittered down by up to half) to 10 s: at most 6 in 3 s.
	assert.LessOrEqual(t, attempts, int64(8), "backed off")
	assert.GreaterOrEqual(t, attempts, int64(2), "still trying")
	assert.Equal(t, 1, lines("claiming operations failed"), "logged once")
	assert.Equal(t, 0, lines("still fails"), "the summary comes after a minute")

	ops.failing.Store(false)
	op := insertNow(t, store, "provision")
	waitState(t, store, op.ID, storage.StateSucceeded, 30*time.Second)
	assert.Equal(t, 1, lines("claiming operations works again"))
	for _, e := range hook.AllEntries() {
		if strings.Contains(e.Message, "works again") {
			assert.Equal(t, logrus.InfoLevel, e.Level)
		}
	}
}
