package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/kyma-project/kyma-environment-broker/internal/fence"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// localLocks are the singleton locks held in this process (dialects without TryLockSQL).
type localLocks struct {
	mu   sync.Mutex
	held map[string]bool
}

// DefaultLockLease is how long a singleton lock is held without renewal when Config.LockLease
// is not set.
const DefaultLockLease = 15 * time.Second

// TryLock takes the singleton lock name: with LeaseLockSQL a leased row, renewed every third
// of the lease and lost when a renewal fails or does not come in time; otherwise in this process.
func (s *Store) TryLock(ctx context.Context, name string) (storage.SingletonLock, bool, error) {
	if s.d.LeaseLockSQL == "" {
		s.locks.mu.Lock()
		defer s.locks.mu.Unlock()
		if s.locks.held[name] {
			return nil, false, nil
		}
		if s.locks.held == nil {
			s.locks.held = map[string]bool{}
		}
		s.locks.held[name] = true
		lost := make(chan struct{})
		var once sync.Once
		return &localLock{lost: lost, release: func() {
			once.Do(func() {
				s.locks.mu.Lock()
				delete(s.locks.held, name)
				s.locks.mu.Unlock()
				close(lost)
			})
		}}, true, nil
	}
	holder := uuid.NewString()
	sent := time.Now()
	var got string
	err := s.w.QueryRowxContext(ctx, s.d.rebind(s.d.LeaseLockSQL), name, holder, s.lockLease.Milliseconds()).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil // held by another, its lease not expired
	}
	if err != nil {
		return nil, false, fmt.Errorf("taking lock %s: %w", name, err)
	}
	lockCtx, lease := fence.New(context.Background(), sent.Add(s.heldFor()))
	l := &leasedLock{s: s, name: name, holder: holder, ctx: lockCtx, lease: lease, stop: make(chan struct{}), done: make(chan struct{})}
	go l.renew()
	return l, true, nil
}

// heldFor is how long after a write that took or renewed it a lock is known to be held here (on
// the monotonic clock): the lease less a sixth for the database's clock running ahead.
func (s *Store) heldFor() time.Duration { return s.lockLease - s.lockLease/6 }

type localLock struct {
	lost    chan struct{}
	release func()
}

func (l *localLock) Lost() <-chan struct{} { return l.lost }
func (l *localLock) Release()              { l.release() }

// leasedLock is a singleton lock held as a leased row.
type leasedLock struct {
	s            *Store
	name, holder string
	// ctx ends when the lease may have expired (not renewed in time), the renewal found it taken,
	// or on Release.
	ctx   context.Context
	lease *fence.Lease
	once  sync.Once
	stop  chan struct{}
	done  chan struct{}
}

func (l *leasedLock) Lost() <-chan struct{} { return l.ctx.Done() }

func (l *leasedLock) Release() {
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		lost := l.ctx.Err() != nil
		l.lease.Stop()
		if lost {
			return // another holder may have it by now
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := l.s.w.ExecContext(ctx, l.s.d.rebind(l.s.d.ReleaseLockSQL), l.name, l.holder); err != nil {
			l.s.log.WithError(err).WithField("lock", l.name).Warn("releasing lock; it ends with its lease")
		}
	})
}

// renew extends the lease every third of it until Release or the lock is lost.
func (l *leasedLock) renew() {
	defer close(l.done)
	t := time.NewTicker(l.s.lockLease / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.ctx.Done():
			l.s.log.WithField("lock", l.name).Warn("lock lease not renewed in time; another replica may take it")
			return
		case <-t.C:
		}
		sent := time.Now()
		ctx, cancel := context.WithDeadline(l.ctx, sent.Add(l.s.lockLease/3))
		res, err := l.s.w.ExecContext(ctx, l.s.d.rebind(l.s.d.RenewLockSQL), l.s.lockLease.Milliseconds(), l.name, l.holder)
		cancel()
		if err != nil {
			// Not renewed this time: the lease runs out unless a later renewal succeeds.
			l.s.log.WithError(err).WithField("lock", l.name).Warn("renewing lock lease")
			continue
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			l.s.log.WithField("lock", l.name).Warn("lock taken over by another replica")
			l.lease.Stop()
			return
		}
		l.lease.Extend(sent.Add(l.s.heldFor()))
	}
}
