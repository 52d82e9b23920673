// Package health serves /healthz (the process is alive), /readyz (the database answers and
// its schema is at the version the process needs, which the caller names) and /metrics.
package health

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/unavailable"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// New returns the handler for the three endpoints; /readyz fails while the store's schema is
// behind wantSchema (the latest version of the migrations the process embeds).
func New(store storage.Store, wantSchema int, reg *prometheus.Registry) http.Handler {
	return NewWith(store, wantSchema, reg, Options{})
}

// Options tune /readyz.
type Options struct {
	// Timeout bounds one readiness check [10s]: long enough for a loaded database, whose slow
	// answers are no reason to take the replica out of service.
	Timeout time.Duration
	// Storage, when set, probes a write on every check: a full storage is not ready.
	Storage *Storage
}

// NewWith is New with options: /readyz says whether this replica can do its work (the database
// answers, its schema is current and, with Options.Storage, it can write).
func NewWith(store storage.Store, wantSchema int, reg *prometheus.Registry, o Options) http.Handler {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), o.Timeout)
		defer cancel()
		if err := ready(ctx, store, wantSchema, o.Storage); err != nil {
			RetryLater(w)
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

func ready(ctx context.Context, store storage.Store, want int, st *Storage) error {
	if err := store.Ping(ctx); err != nil {
		return fmt.Errorf("database unreachable: %w", err)
	}
	have, err := store.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	if have < want {
		return fmt.Errorf("database schema %d is behind %d: migrations not applied", have, want)
	}
	if st != nil {
		if err := st.Probe(ctx); storage.IsFull(err) {
			return fmt.Errorf("%s: %w", unavailable.FullMessage, err)
		} else if err != nil {
			return fmt.Errorf("probing a write: %w", err)
		}
	}
	return nil
}
