package lifecycle

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/catalog"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// Config is the jobs' configuration (APP_LIFECYCLE_*).
type Config struct {
	// ExpiryInterval: how often the expiry job looks for instances past their plan's
	// expiry_days (0 turns the job off; PUT /expire/... still works).
	ExpiryInterval time.Duration `envconfig:"LIFECYCLE_EXPIRY_INTERVAL" default:"1h"`
	// RetriggerInterval: the wait between runs of steps left not completed (0 turns the job off).
	RetriggerInterval time.Duration `envconfig:"LIFECYCLE_RETRIGGER_INTERVAL" default:"10m"`
	// RetriggerMaxAge: how long after they were left the steps are retried; then they are
	// reported as orphaned resources (GET /info/orphans).
	RetriggerMaxAge time.Duration `envconfig:"LIFECYCLE_RETRIGGER_MAX_AGE" default:"72h"`
}

// Validate refuses settings the jobs cannot work with.
func (c Config) Validate() error {
	if c.ExpiryInterval < 0 || c.RetriggerInterval < 0 {
		return fmt.Errorf("APP_LIFECYCLE_EXPIRY_INTERVAL and APP_LIFECYCLE_RETRIGGER_INTERVAL must not be negative")
	}
	if c.RetriggerInterval > 0 && c.RetriggerMaxAge < c.RetriggerInterval {
		return fmt.Errorf("APP_LIFECYCLE_RETRIGGER_MAX_AGE (%s) must be at least APP_LIFECYCLE_RETRIGGER_INTERVAL (%s)", c.RetriggerMaxAge, c.RetriggerInterval)
	}
	return nil
}

// ExpiryDays are the catalog's plans with an expiry.
func ExpiryDays(c *catalog.Catalog) map[string]int {
	out := map[string]int{}
	for _, p := range c.Plans() {
		if p.ExpiryDays > 0 {
			out[p.ID] = p.ExpiryDays
		}
	}
	return out
}

// Start runs the configured jobs until ctx ends; wait returns when they have stopped.
func Start(ctx context.Context, cfg Config, store storage.Store, x Expirer, log logrus.FieldLogger) (wait func(), err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	run := func(p Periodic) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.Run(ctx)
		}()
	}
	clock := WallClock()
	if cfg.ExpiryInterval > 0 {
		job := ExpiryJob{Expirer: x, Clock: clock, Log: log}
		run(Periodic{Store: store, Name: "expiry", Interval: cfg.ExpiryInterval, Log: log, Round: func(ctx context.Context) error {
			_, err := job.Round(ctx)
			return err
		}})
	}
	if cfg.RetriggerInterval > 0 {
		job := RetriggerJob{Store: store, Clock: clock, Log: log, RetryInterval: cfg.RetriggerInterval, MaxAge: cfg.RetriggerMaxAge, OperationTimeout: x.OperationTimeout}
		run(Periodic{Store: store, Name: "retrigger", Interval: cfg.RetriggerInterval, Log: log, Round: func(ctx context.Context) error {
			_, err := job.Round(ctx)
			return err
		}})
	}
	return wg.Wait, nil
}
