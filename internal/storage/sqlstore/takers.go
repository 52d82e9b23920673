package sqlstore

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// takers are the engines of this process that take new operations (storage.Store.Takes). A
// provisioning's operations then start without a claim: the claim rewrote each of them (a new
// row version in the operation's four indexes) and read it back, decrypted, in a statement of
// its own, and the insert woke every engine to look for it.
type takers struct {
	mu   sync.Mutex // serialises the changes of list
	list atomic.Pointer[[]*taker]
}

// taker is one registration (its pointer tells it from another of the same taker).
type taker struct{ storage.Taker }

// Takes implements storage.Store. Registrations change rarely (an engine's start and stop) and
// every insert of a first operation reads them: the list is replaced, never changed in place.
func (s *Store) Takes(ctx context.Context, t storage.Taker) {
	entry := &taker{t}
	s.takers.change(func(l []*taker) []*taker { return append(l, entry) })
	context.AfterFunc(ctx, func() {
		s.takers.change(func(l []*taker) []*taker { return slices.DeleteFunc(l, func(e *taker) bool { return e == entry }) })
	})
}

func (t *takers) change(f func([]*taker) []*taker) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var l []*taker
	if p := t.list.Load(); p != nil {
		l = slices.Clone(*p)
	}
	l = f(l)
	t.list.Store(&l)
}

// reserve keeps a worker of a taker for op when op is a new operation due at once, not leased.
func (t *takers) reserve(op storage.Operation) (storage.Reservation, bool) {
	p := t.list.Load()
	if p == nil || op.State != storage.StatePending || op.LeaseOwner != "" || op.DueAt == nil || op.DueAt.After(time.Now()) {
		return storage.Reservation{}, false
	}
	for _, e := range *p {
		if r, ok := e.Reserve(op.Type); ok {
			return r, true
		}
	}
	return storage.Reservation{}, false
}

// detached is a copy of a new operation that shares nothing with op: the taker's worker runs
// it while the caller of the insert still reads op (a step may change its secrets in place).
func detached(op storage.Operation) storage.Operation {
	op.Data = slices.Clone(op.Data)
	op.Secrets = maps.Clone(op.Secrets)
	op.Progress.FinishedStages = slices.Clone(op.Progress.FinishedStages)
	op.Progress.StageStartedAt = maps.Clone(op.Progress.StageStartedAt)
	op.Progress.Steps = maps.Clone(op.Progress.Steps)
	for name, sp := range op.Progress.Steps {
		if sp.RetryUntil != nil {
			v := *sp.RetryUntil
			sp.RetryUntil = &v
			op.Progress.Steps[name] = sp
		}
	}
	op.Progress.ExecutedButNotCompleted = slices.Clone(op.Progress.ExecutedButNotCompleted)
	for _, t := range []**time.Time{&op.DueAt, &op.LeaseExpiresAt} {
		if *t != nil {
			v := **t
			*t = &v
		}
	}
	return op
}
