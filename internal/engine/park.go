package engine

import (
	"sync"
	"time"
)

// Signals lets a run whose step waits for something in this process (Operation.WaitIsSignaledBy)
// be parked instead of written: the engine keeps the operation's lease (the heartbeat extends
// it) and its run in memory, frees the worker, and runs the step again when Signal is given
// the key, or after maxPark without one. Only a short wait parks (at most maxPark: the first
// poll after a request, not a long wait's backed-off polls), and for maxPark whatever the
// step asked: its poll is a fallback for a lost signal, which signalled waits already stretch
// (WaitBackoff); under load the embedded provisioner's operation takes seconds, often longer
// than the step's poll.
// A signal reaches only runs parked in its own process: with replicas, a run parked in one
// while the provisioner's operation finishes in another polls after maxPark. A wait that ends that soon then
// costs no writes: the durable retry wrote the operation (release), the wake wrote it (due
// now), the claim wrote it again and read it back, once for every provisioning whose cluster
// is quick. A crash while parked loses nothing that decides
// the operation's future: its row holds the lease and the steps done, and another worker
// runs the waiting step again when the lease expires (or at once, on this owner's restart).
// A run parks once: if it still waits after that, its wait is written as any other.
// Signals are given by the code that finishes what is waited for (the embedded provisioner:
// provisioner.WakeWaiters); create them with NewSignals and pass them to New (WithSignals).
type Signals struct {
	mu   sync.Mutex
	runs map[string]*parked
	// recent: keys signalled while nothing was parked on them, and when: a run that is about
	// to park on one of them runs its step again at once (the signal came first).
	recent map[string]time.Time
	// open: the engine runs and takes parked runs; resume hands one back to a worker.
	open    bool
	limit   int
	resume  func(func())
	maxPark time.Duration
	// pending: resumed runs being handed to a worker (the engine waits for them on shutdown).
	pending sync.WaitGroup
}

// parked is one run waiting for its signal or its timer.
type parked struct {
	timer *time.Timer
	run   func()
}

type parkOutcome int

const (
	// parkRefused: the run is not parked (no room, the engine stopping, a run already parked
	// on the key): its wait is written.
	parkRefused parkOutcome = iota
	parkHeld
	// parkSignaled: the key was signalled just before: run the step again now.
	parkSignaled
)

const (
	// defaultMaxPark is how long a run parks: parked runs stay few and short.
	defaultMaxPark = 10 * time.Second
	// recentSignal is how long a signal nobody was parked on is remembered.
	recentSignal = 10 * time.Second
	// maxRecent bounds the remembered signals (older ones are dropped first).
	maxRecent = 4096
)

// NewSignals returns the signals of one engine.
func NewSignals() *Signals {
	return &Signals{runs: map[string]*parked{}, recent: map[string]time.Time{}, maxPark: defaultMaxPark}
}

// WithSignals lets the engine park runs that wait for signals given through s.
func WithSignals(s *Signals) Option { return func(e *Engine) { e.signals = s } }

// Signals returns the engine's signals (WithSignals), nil when it has none.
func (e *Engine) Signals() *Signals { return e.signals }

// Signal resumes the run parked on key, if any, and reports whether there was one. It does
// not block: the run goes back to a worker in the background.
func (s *Signals) Signal(key string) bool {
	if s == nil || key == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.runs[key]
	if !ok {
		if s.open {
			s.remember(key, time.Now())
		}
		return false
	}
	delete(s.runs, key)
	p.timer.Stop()
	s.pending.Add(1)
	go s.hand(p.run)
	return true
}

// remember records a signal that found nothing parked; called with mu held.
func (s *Signals) remember(key string, now time.Time) {
	if len(s.recent) >= maxRecent {
		for k, at := range s.recent {
			if now.Sub(at) > recentSignal {
				delete(s.recent, k)
			}
		}
		if len(s.recent) >= maxRecent {
			clear(s.recent)
		}
	}
	s.recent[key] = now
}

// start opens the signals for an engine's Run: resume hands a run back to a worker (it may
// block until one takes it); at most limit runs are parked at once.
func (s *Signals) start(limit int, resume func(func())) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open, s.limit, s.resume = true, limit, resume
}

// park parks run on key, a wait of at most maxPark, for maxPark; with run nil (a run that may
// not park: it parked once) it only looks for the signal. A signal given while the step ran
// comes first whatever the wait: a run that cannot park writes its wait, and the wake that
// follows an unparked signal skips a leased operation, so the signal would be lost for the
// whole wait (a signalled wait's backed-off poll, minutes).
func (s *Signals) park(key string, wait time.Duration, run func()) parkOutcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.open {
		return parkRefused
	}
	if at, ok := s.recent[key]; ok {
		delete(s.recent, key)
		if time.Since(at) <= recentSignal {
			return parkSignaled
		}
	}
	if run == nil || wait > s.maxPark {
		return parkRefused
	}
	if _, taken := s.runs[key]; taken || len(s.runs) >= s.limit {
		return parkRefused
	}
	p := &parked{run: run}
	p.timer = time.AfterFunc(s.maxPark, func() { s.expire(key, p) })
	s.runs[key] = p
	return parkHeld
}

// expire resumes p when maxPark has passed unsignalled.
func (s *Signals) expire(key string, p *parked) {
	s.mu.Lock()
	if s.runs[key] != p {
		s.mu.Unlock()
		return // signalled, or taken by close
	}
	delete(s.runs, key)
	s.pending.Add(1)
	s.mu.Unlock()
	s.hand(p.run)
}

func (s *Signals) hand(run func()) {
	defer s.pending.Done()
	s.resume(run)
}

// close stops parking and resumes every parked run (they see the engine stopping and release
// their operations); it returns once each is with a worker.
func (s *Signals) close() {
	s.mu.Lock()
	s.open = false
	runs := make([]func(), 0, len(s.runs))
	for k, p := range s.runs {
		p.timer.Stop()
		runs = append(runs, p.run)
		delete(s.runs, k)
	}
	clear(s.recent)
	s.pending.Add(len(runs))
	s.mu.Unlock()
	for _, run := range runs {
		s.hand(run)
	}
	s.pending.Wait()
}

// Parked is how many runs are parked.
func (s *Signals) Parked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.runs)
}
