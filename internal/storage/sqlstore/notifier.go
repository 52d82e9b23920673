package sqlstore

import (
	"context"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// notifier wakes the other processes (Dialect.Notify) after the writes that made operations
// due, in a statement of its own, and coalesces: while one notification is being sent, any
// number of writes ask for one more, sent after it, at most one every notifyPace.
//
// Why not within the writes' statements, as before: PostgreSQL serialises the commits of every
// notifying transaction of the cluster (a lock held from before the commit until after it,
// its WAL flush included), so a write that notified could not share a flush with any other;
// a provisioning made three (pgbench's figures are in docs/contributor/step-engine.md's
// scheduling section and performance.md). A notification only shortens the others' wait for work they would
// find at their next poll, so it does not need the write's transaction: it is sent once the
// write has committed, and without waiting for its own WAL flush (Dialect.Notify).
type notifier struct {
	send func(ctx context.Context) error
	log  logrus.FieldLogger
	pace time.Duration
	req  chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// notifyPace is the least time between two notifications of one process: under load the
// writes that ask for one come every few milliseconds, and every notification wakes every
// replica's listener.
const notifyPace = 5 * time.Millisecond

// notifyTimeout bounds one notification; a database that does not answer costs the other
// replicas their next poll, nothing more.
const notifyTimeout = 5 * time.Second

func startNotifier(send func(ctx context.Context) error, pace time.Duration, log logrus.FieldLogger) *notifier {
	n := &notifier{send: send, log: log, pace: pace, req: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go n.run()
	return n
}

// request asks for a notification; it never blocks.
func (n *notifier) request() { signal(n.req) }

func (n *notifier) run() {
	defer close(n.done)
	for {
		select {
		case <-n.stop:
			// Closing: what was asked for still goes out (a graceful shutdown releases its
			// leases and asks the other replicas to take them over).
			select {
			case <-n.req:
				n.notify()
			default:
			}
			return
		case <-n.req:
		}
		n.notify()
		select {
		case <-n.stop:
		case <-time.After(n.pace):
		}
	}
}

func (n *notifier) notify() {
	ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
	defer cancel()
	if err := n.send(ctx); err != nil {
		n.log.WithError(err).Warn("notifying other replicas of new or released operations failed; they will find them on their next poll")
	}
}

// close sends what was asked for and stops.
func (n *notifier) close() {
	n.once.Do(func() { close(n.stop) })
	<-n.done
}
