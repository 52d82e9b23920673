// Package profiling is the broker's opt-in profiling for benchmarks and investigations: a CPU
// profile of the whole run written to a file, and net/http/pprof served on a loopback address.
// Both are off by default; the binary users run is the one that is profiled.
package profiling

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	runtimepprof "runtime/pprof"
	"time"

	"github.com/sirupsen/logrus"
)

// Config is read from APP_* variables.
type Config struct {
	// CPUProfile is a file the broker writes a CPU profile of its whole run to (ended by SIGTERM
	// or Ctrl-C).
	CPUProfile string `envconfig:"CPU_PROFILE"`
	// PprofAddress serves net/http/pprof (heap, goroutines, CPU for a period); loopback only,
	// since profiles show memory contents.
	PprofAddress string `envconfig:"PPROF_ADDRESS"`
}

// Start starts what cfg asks for; the returned stop ends it (the CPU profile is complete only
// then). The pprof server also ends with ctx.
func Start(ctx context.Context, cfg Config, log *logrus.Logger) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if cfg.CPUProfile != "" {
		s, err := cpuProfile(cfg.CPUProfile)
		if err != nil {
			return nil, err
		}
		stops = append(stops, s)
	}
	if cfg.PprofAddress != "" {
		s, err := serve(ctx, cfg.PprofAddress, log)
		if err != nil {
			stop()
			return nil, err
		}
		stops = append(stops, s)
	}
	return stop, nil
}

func cpuProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating APP_CPU_PROFILE %s: %w", path, err)
	}
	if err := runtimepprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting the CPU profile (APP_CPU_PROFILE): %w", err)
	}
	return func() { runtimepprof.StopCPUProfile(); f.Close() }, nil
}

func serve(ctx context.Context, addr string, log *logrus.Logger) (func(), error) {
	if err := loopback(addr); err != nil {
		return nil, fmt.Errorf("APP_PPROF_ADDRESS %q: %w", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on APP_PPROF_ADDRESS %q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.WithError(err).Warn("pprof server ended")
		}
	}()
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
		}
		_ = srv.Close()
	}()
	log.WithField("address", ln.Addr().String()).Info("serving pprof (APP_PPROF_ADDRESS)")
	return func() { close(done) }, nil
}

// loopback refuses an address that is reachable from other machines.
func loopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return errors.New("must be a loopback address (127.0.0.1:PORT, [::1]:PORT or localhost:PORT)")
	}
	return nil
}
