// Package migratecmd is `broker migrate`: the operator's control of the database's schema
// migrations (up, down, version, force), configured by the APP_DATABASE_* variables.
package migratecmd

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/kelseyhightower/envconfig"
	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/migrate"
)

// Command is `broker migrate`; with no verb it migrates up, as it did before the verbs.
func Command(log logrus.FieldLogger) *cobra.Command {
	up := func(cmd *cobra.Command, _ []string) error {
		return withMigrator(cmd.Context(), cmd.OutOrStdout(), func(m *migrate.Migrator, cfg driver.Config, out io.Writer) error {
			v, err := m.Up()
			if err != nil {
				return err
			}
			log.WithField("version", v).Info("database migrated up")
			_, err = fmt.Fprintf(out, "database driver=%s schema_version=%d\n", cfg.Driver, v)
			return err
		})
	}
	root := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations (also applied on every start) and print the schema version; verbs: up, down [N], version, force N",
		Args:  cobra.NoArgs,
		RunE:  up,
	}
	root.AddCommand(&cobra.Command{
		Use:   "up",
		Short: "Apply every migration not applied yet",
		Args:  cobra.NoArgs,
		RunE:  up,
	})
	root.AddCommand(&cobra.Command{
		Use:   "down [N]",
		Short: "Undo the last N migrations (default 1); refuses to go below version 0",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			steps := 1
			if len(args) == 1 {
				n, err := strconv.Atoi(args[0])
				if err != nil || n < 1 {
					return fmt.Errorf("migrate down: N must be a positive number of steps, got %q", args[0])
				}
				steps = n
			}
			return withMigrator(cmd.Context(), cmd.OutOrStdout(), func(m *migrate.Migrator, cfg driver.Config, out io.Writer) error {
				v, err := m.Down(steps)
				if err != nil {
					return err
				}
				log.WithField("version", v).WithField("steps", steps).Info("database migrated down")
				_, err = fmt.Fprintf(out, "database driver=%s schema_version=%d\n", cfg.Driver, v)
				return err
			})
		},
	})
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the schema version and whether a migration failed at it (dirty)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withMigrator(cmd.Context(), cmd.OutOrStdout(), func(m *migrate.Migrator, cfg driver.Config, out io.Writer) error {
				v, dirty, err := m.Version()
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(out, "database driver=%s schema_version=%d dirty=%t\n", cfg.Driver, v, dirty)
				return err
			})
		},
	})
	root.AddCommand(&cobra.Command{
		Use:   "force N",
		Short: "Record version N as applied and clean without running anything (after repairing a failed migration by hand)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[0])
			if err != nil || n < 0 {
				return fmt.Errorf("migrate force: N must be a version (0 or more), got %q", args[0])
			}
			return withMigrator(cmd.Context(), cmd.OutOrStdout(), func(m *migrate.Migrator, cfg driver.Config, out io.Writer) error {
				if err := m.Force(n); err != nil {
					return err
				}
				log.WithField("version", n).Warn("database schema version forced")
				_, err := fmt.Fprintf(out, "database driver=%s schema_version=%d dirty=false\n", cfg.Driver, n)
				return err
			})
		},
	})
	return root
}

func withMigrator(ctx context.Context, out io.Writer, f func(*migrate.Migrator, driver.Config, io.Writer) error) error {
	var cfg driver.Config
	if err := envconfig.Process("APP", &cfg); err != nil {
		return fmt.Errorf("reading database configuration: %w", err)
	}
	m, closeFn, err := driver.OpenMigrator(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = closeFn() }()
	return f(m, cfg, out)
}
