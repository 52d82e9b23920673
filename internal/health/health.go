// Package health serves /healthz (the process is alive), /readyz (the database answers and
// every embedded migration is applied) and /metrics.
package health

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// New returns the handler for the three endpoints.
func New(store storage.Store, db driver.Config, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := ready(r.Context(), store, db); err != nil {
			RetryLater(w)
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

func ready(ctx context.Context, store storage.Store, db driver.Config) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := store.Ping(ctx); err != nil {
		return fmt.Errorf("database unreachable: %w", err)
	}
	have, err := store.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	want, err := driver.LatestSchemaVersion(db)
	if err != nil {
		return err
	}
	if have < want {
		return fmt.Errorf("database schema %d is behind %d: migrations not applied", have, want)
	}
	return nil
}
