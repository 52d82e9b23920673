package health

import (
	"context"
	"sync"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
)

// Storage watches whether the database can be written: a full disk fails every write while
// pings and reads succeed. It probes a write now and then (Run) and on every readiness check,
// logs each change once (full, writable again) and exports it as keb_storage_full.
type Storage struct {
	store storage.Store
	log   logrus.FieldLogger
	gauge prometheus.Gauge

	mu   sync.Mutex
	full bool
}

// NewStorage registers keb_storage_full on reg (nil: not exported).
func NewStorage(store storage.Store, log logrus.FieldLogger, reg prometheus.Registerer) (*Storage, error) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "keb_storage_full",
		Help: "1 while the broker's database cannot write for lack of space (the last write probe failed so), else 0."})
	if reg != nil {
		if err := reg.Register(g); err != nil {
			return nil, err
		}
	}
	return &Storage{store: store, log: log, gauge: g}, nil
}

// Probe writes a probe row (rolled back) and records whether the storage is full; it returns
// the probe's error.
func (s *Storage) Probe(ctx context.Context) error {
	err := s.store.ProbeWrite(ctx)
	switch {
	case storage.IsFull(err):
		s.set(true, err)
	case err == nil:
		s.set(false, nil)
	}
	// Other errors (unreachable, a deadline) say nothing about space.
	return err
}

// Full reports whether the last probe found the storage full.
func (s *Storage) Full() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.full
}

func (s *Storage) set(full bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if full == s.full {
		return
	}
	s.full = full
	if full {
		s.gauge.Set(1)
		s.log.WithError(err).Error("the database's storage is full: writes fail (requests answer 503) until space is freed")
		return
	}
	s.gauge.Set(0)
	s.log.Info("the database's storage is writable again")
}

// Run probes every interval until ctx ends.
func (s *Storage) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		probeCtx, cancel := context.WithTimeout(ctx, every)
		_ = s.Probe(probeCtx)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
