package sqlstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// lockCheckInterval is how often a held session lock checks its connection.
const lockCheckInterval = 2 * time.Second

// localLocks are the singleton locks held in this process (dialects without TryLockSQL).
type localLocks struct {
	mu   sync.Mutex
	held map[string]bool
}

// TryLock takes the singleton lock name: with TryLockSQL on a connection of its own, held
// until Release or until that connection breaks; otherwise in this process.
func (s *Store) TryLock(ctx context.Context, name string) (storage.SingletonLock, bool, error) {
	if s.d.TryLockSQL == "" {
		s.locks.mu.Lock()
		defer s.locks.mu.Unlock()
		if s.locks.held[name] {
			return nil, false, nil
		}
		if s.locks.held == nil {
			s.locks.held = map[string]bool{}
		}
		s.locks.held[name] = true
		l := &sessionLock{lost: make(chan struct{})}
		l.release = func() {
			s.locks.mu.Lock()
			delete(s.locks.held, name)
			s.locks.mu.Unlock()
		}
		return l, true, nil
	}
	conn, err := s.w.Connx(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("taking lock %s: %w", name, err)
	}
	var ok bool
	if err := conn.QueryRowxContext(ctx, s.d.rebind(s.d.TryLockSQL), name).Scan(&ok); err != nil {
		_ = conn.Close()
		return nil, false, fmt.Errorf("taking lock %s: %w", name, err)
	}
	if !ok {
		return nil, false, conn.Close()
	}
	l := &sessionLock{lost: make(chan struct{}), stop: make(chan struct{})}
	l.release = func() {
		close(l.stop)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := conn.ExecContext(ctx, s.d.rebind(s.d.UnlockSQL), name); err != nil {
			s.log.WithError(err).WithField("lock", name).Warn("releasing lock; it ends with its connection")
		}
		_ = conn.Close()
	}
	go l.watch(conn, s, name)
	return l, true, nil
}

type sessionLock struct {
	lost    chan struct{}
	stop    chan struct{}
	once    sync.Once
	release func()
}

func (l *sessionLock) Lost() <-chan struct{} { return l.lost }

func (l *sessionLock) Release() {
	l.once.Do(func() {
		l.release()
		close(l.lost)
	})
}

// watch pings the lock's connection: once it breaks, the database has released the lock.
func (l *sessionLock) watch(conn *sqlx.Conn, s *Store, name string) {
	t := time.NewTicker(lockCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), lockCheckInterval)
			err := conn.PingContext(ctx)
			cancel()
			if err != nil {
				s.log.WithError(err).WithField("lock", name).Warn("lost the connection that holds the lock")
				l.once.Do(func() {
					_ = conn.Close()
					close(l.lost)
				})
				return
			}
		}
	}
}
