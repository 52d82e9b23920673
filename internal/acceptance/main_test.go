package acceptance

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/app"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/sirupsen/logrus"
)

// childEnv marks the test binary started as a broker process by the kill-and-restart test;
// childSandbox is the sandbox it talks to.
const (
	childEnv     = "KEB_ACCEPTANCE_BROKER"
	childSandbox = "KEB_ACCEPTANCE_SANDBOX_URL"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(runChildBroker())
	}
	os.Exit(m.Run())
}

// runChildBroker serves the broker as cmd/broker does, its external systems pointed at the test's
// sandbox, until it is signalled (or killed).
func runChildBroker() int {
	log := logrus.New()
	log.SetFormatter(&logrus.JSONFormatter{})
	log.SetLevel(logrus.WarnLevel)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := app.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg.Externals.Settings.SandboxEnabled = false
	cfg.Externals.PointAt(os.Getenv(childSandbox), standins.DefaultCredentials())
	if err := app.Serve(ctx, cfg, log); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
