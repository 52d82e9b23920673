// Package orchestration runs upgrades across the fleet as persisted orchestrations: the manager
// stores an orchestration with one row per selected runtime, and one scheduler across replicas
// (a database singleton lock) starts each runtime's upgrade when it is due, at most
// strategy.parallel.workers at a time, inserting the engine operation and marking the row in one
// transaction so that a restart never starts an upgrade twice.
package orchestration

import (
	"fmt"
	"strings"
	"time"
)

// Config tunes orchestrations (APP_ORCHESTRATION_*).
type Config struct {
	// PollInterval: how often the scheduler looks at unfinished orchestrations.
	PollInterval time.Duration `envconfig:"ORCHESTRATION_POLL_INTERVAL" default:"5s"`
	// BusyRetryInterval: when an instance busy with another operation is tried again.
	BusyRetryInterval time.Duration `envconfig:"ORCHESTRATION_BUSY_RETRY_INTERVAL" default:"1m"`
	// LockRetryInterval: how often a replica without the scheduler lock tries to take it.
	LockRetryInterval time.Duration `envconfig:"ORCHESTRATION_LOCK_RETRY_INTERVAL" default:"10s"`
	// MaxWorkers bounds strategy.parallel.workers.
	MaxWorkers int `envconfig:"ORCHESTRATION_MAX_WORKERS" default:"100"`
	// MaintenanceWindow: the daily window (UTC, "HH:MM-HH:MM", may wrap midnight) in which
	// upgrades scheduled "maintenanceWindow" start.
	MaintenanceWindow string `envconfig:"ORCHESTRATION_MAINTENANCE_WINDOW" default:"00:00-06:00"`
	// UpgradeTimeout is each upgrade operation's deadline (APP_BROKER_UPGRADE_TIMEOUT).
	UpgradeTimeout time.Duration `ignored:"true"`
}

func (c Config) withDefaults() (Config, window, error) {
	if c.PollInterval <= 0 {
		c.PollInterval = 5 * time.Second
	}
	if c.BusyRetryInterval <= 0 {
		c.BusyRetryInterval = time.Minute
	}
	if c.LockRetryInterval <= 0 {
		c.LockRetryInterval = 10 * time.Second
	}
	if c.MaxWorkers <= 0 {
		c.MaxWorkers = 100
	}
	if c.MaintenanceWindow == "" {
		c.MaintenanceWindow = "00:00-06:00"
	}
	if c.UpgradeTimeout <= 0 {
		c.UpgradeTimeout = 3 * time.Hour
	}
	w, err := parseWindow(c.MaintenanceWindow)
	if err != nil {
		return c, window{}, fmt.Errorf("APP_ORCHESTRATION_MAINTENANCE_WINDOW: %w", err)
	}
	return c, w, nil
}

// window is a daily time window in UTC: [begin, end) as offsets from midnight.
type window struct{ begin, end time.Duration }

func parseWindow(s string) (window, error) {
	from, to, ok := strings.Cut(s, "-")
	if !ok {
		return window{}, fmt.Errorf("want HH:MM-HH:MM, got %q", s)
	}
	var w window
	for i, part := range []string{from, to} {
		t, err := time.Parse("15:04", strings.TrimSpace(part))
		if err != nil {
			return window{}, fmt.Errorf("want HH:MM-HH:MM, got %q", s)
		}
		d := time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute
		if i == 0 {
			w.begin = d
		} else {
			w.end = d
		}
	}
	if w.begin == w.end {
		return window{}, fmt.Errorf("the window %q is empty", s)
	}
	return w, nil
}

// contains reports whether t falls in the window.
func (w window) contains(t time.Time) bool {
	t = t.UTC()
	d := t.Sub(t.Truncate(24 * time.Hour))
	if w.begin < w.end {
		return d >= w.begin && d < w.end
	}
	return d >= w.begin || d < w.end // wraps midnight
}

// next is t when t is in the window, else the window's next beginning.
func (w window) next(t time.Time) time.Time {
	if w.contains(t) {
		return t
	}
	t = t.UTC()
	day := t.Truncate(24 * time.Hour)
	begin := day.Add(w.begin)
	if !begin.After(t) {
		begin = begin.Add(24 * time.Hour)
	}
	return begin
}
