package logging

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"
)

// Main is a command's main: run gets the logger of APP_LOG_FORMAT/APP_LOG_LEVEL and a context
// cancelled on SIGINT or SIGTERM. A bad logging configuration exits 2, a failure of run 1.
func Main(name string, run func(ctx context.Context, log *logrus.Logger) error) {
	log, err := FromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log); err != nil {
		log.WithError(err).Error(name + " failed")
		stop()
		os.Exit(1)
	}
}
