// Command broker is the Kyma Environment Broker process: `broker` (or `broker serve`) runs the
// OSB API, the operator API and the step-engine workers; `migrate` and `rotate-secrets`
// manage the database.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/kyma-project/kyma-environment-broker/internal/app"
	"github.com/kyma-project/kyma-environment-broker/internal/app/migratecmd"
	"github.com/kyma-project/kyma-environment-broker/internal/gcpolicy"
	"github.com/kyma-project/kyma-environment-broker/internal/logging"
	"github.com/kyma-project/kyma-environment-broker/internal/observe"
	"github.com/kyma-project/kyma-environment-broker/internal/profiling"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
)

func main() {
	log, err := logging.FromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := rootCommand(log).ExecuteContext(ctx); err != nil {
		log.WithError(err).Error("broker failed")
		stop()
		os.Exit(1)
	}
}

func rootCommand(log *logrus.Logger) *cobra.Command {
	root := &cobra.Command{
		Use:           "broker",
		Short:         "Kyma Environment Broker",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	serve := serveCommand(log)
	root.RunE = serve.RunE // `broker` alone serves
	observe.AddVersion(root)
	root.AddCommand(serve)
	root.AddCommand(migratecmd.Command(log))
	root.AddCommand(&cobra.Command{
		Use:   "rotate-secrets",
		Short: "Re-encrypt every stored secret with APP_DATABASE_SECRET_KEY (old keys in APP_DATABASE_SECRET_KEYS_PREVIOUS)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := databaseConfig()
			if err != nil {
				return err
			}
			store, err := driver.Open(cmd.Context(), cfg, log)
			if err != nil {
				return err
			}
			defer store.Close()
			n, err := store.RotateSecrets(cmd.Context())
			if err != nil {
				return fmt.Errorf("rotating secrets: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "re-encrypted rows=%d\n", n)
			return nil
		},
	})
	return root
}

func databaseConfig() (driver.Config, error) {
	var cfg driver.Config
	if err := envconfig.Process("APP", &cfg); err != nil {
		return cfg, fmt.Errorf("reading database configuration: %w", err)
	}
	return cfg, nil
}

func serveCommand(log *logrus.Logger) *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run the broker: OSB API, operator API and step-engine workers (embedding the provisioner unless APP_PROVISIONER_URL is set, and the sandbox unless APP_SANDBOX_ENABLED=false)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := app.Load()
			if err != nil {
				return err
			}
			stop, err := profiling.Start(cmd.Context(), cfg.Profiling, log)
			if err != nil {
				return err
			}
			defer stop()
			gcpolicy.Apply(log)
			shutdown, err := observe.SetupTracing(cmd.Context(), "kyma-environment-broker", os.Getenv, log)
			if err != nil {
				return err
			}
			defer flushTraces(shutdown, log)
			return app.Serve(cmd.Context(), cfg, log)
		},
	}
}

// flushTraces exports the spans still buffered, within a bound: a stopping process does not
// wait for an unreachable collector.
func flushTraces(shutdown func(context.Context) error, log logrus.FieldLogger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		log.WithError(err).Warn("flushing traces")
	}
}
