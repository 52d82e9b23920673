package lifecycle

import (
	"context"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// Clock is the jobs' source of time; tests use a controllable one.
type Clock interface{ Now() time.Time }

type wallClock struct{}

// WallClock is the real time.
func WallClock() Clock { return wallClock{} }

func (wallClock) Now() time.Time { return time.Now() }

// Periodic runs a job every interval in one process among all replicas at a time (a database
// lock taken per round, so a replica that dies hands the job over at the next round).
type Periodic struct {
	Store    storage.Store
	Name     string
	Interval time.Duration
	Log      logrus.FieldLogger
	// Round does one round of work.
	Round func(ctx context.Context) error
}

// Run runs rounds until ctx ends.
func (p Periodic) Run(ctx context.Context) {
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	for {
		p.once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// once runs one round if this process gets the lock; a round is bounded by the interval.
func (p Periodic) once(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, p.Interval)
	defer cancel()
	lock, ok, err := p.Store.TryLock(ctx, "keb-job:"+p.Name)
	if err != nil {
		p.Log.WithError(err).WithField("job", p.Name).Warn("job round skipped: taking its lock failed")
		return
	}
	if !ok {
		p.Log.WithField("job", p.Name).Debug("job round skipped: another replica runs it")
		return
	}
	defer lock.Release()
	// A lock lost mid-round (its connection broke) ends the round: another replica may take over.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-lock.Lost():
			stop()
		case <-ctx.Done():
		}
	}()
	if err := p.Round(ctx); err != nil && ctx.Err() == nil {
		p.Log.WithError(err).WithField("job", p.Name).Warn("job round failed; the next round tries again")
	}
}
