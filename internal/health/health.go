// Package health serves /healthz (the process is alive), /readyz (the database answers and
// its schema is at the version the process needs, which the caller names) and /metrics.
package health

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// New returns the handler for the three endpoints; /readyz fails while the store's schema is
// behind wantSchema (the latest version of the migrations the process embeds).
func New(store storage.Store, wantSchema int, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := ready(r.Context(), store, wantSchema); err != nil {
			RetryLater(w)
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

func ready(ctx context.Context, store storage.Store, want int) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
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
	return nil
}
