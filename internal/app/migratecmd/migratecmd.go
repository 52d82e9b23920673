// Package migratecmd is `broker migrate`: the operator's control of the database's schema
// migrations (up, down, version, force), configured by the APP_DATABASE_* variables. The database
// holds two migration lines: the broker's (schema_migrations) and the embedded sandbox's
// (sandbox_schema_migrations); --line picks one.
package migratecmd

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/kelseyhightower/envconfig"
	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durablesql"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/migrate"
)

// Command is `broker migrate`; with no verb it migrates up, as it did before the verbs.
func Command(log logrus.FieldLogger) *cobra.Command {
	line := lineBroker
	withMigrator := func(ctx context.Context, out io.Writer, f func(*migrate.Migrator, driver.Config, io.Writer) error) error {
		return openLine(ctx, line, out, f)
	}
	up := func(cmd *cobra.Command, _ []string) error {
		return withMigrator(cmd.Context(), cmd.OutOrStdout(), func(m *migrate.Migrator, cfg driver.Config, out io.Writer) error {
			v, err := m.Up()
			if err != nil {
				return err
			}
			log.WithField("version", v).Info("database migrated up")
			_, err = fmt.Fprintf(out, "database driver=%s line=%s schema_version=%d\n", cfg.Driver, line, v)
			return err
		})
	}
	root := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations (also applied on every start) and print the schema version; verbs: up, down [N], version, force N",
		Args:  cobra.NoArgs,
		RunE:  up,
	}
	root.PersistentFlags().Var(&line, "line", "the migration line: broker (the broker's tables) or sandbox (the embedded sandbox's tables)")
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
				_, err = fmt.Fprintf(out, "database driver=%s line=%s schema_version=%d\n", cfg.Driver, line, v)
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
				_, err = fmt.Fprintf(out, "database driver=%s line=%s schema_version=%d dirty=%t\n", cfg.Driver, line, v, dirty)
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
				_, err := fmt.Fprintf(out, "database driver=%s line=%s schema_version=%d dirty=false\n", cfg.Driver, line, n)
				return err
			})
		},
	})
	return root
}

// lineName is the --line flag's value.
type lineName string

const (
	lineBroker  lineName = "broker"
	lineSandbox lineName = "sandbox"
)

func (l *lineName) String() string { return string(*l) }
func (l *lineName) Type() string   { return "line" }
func (l *lineName) Set(v string) error {
	switch lineName(v) {
	case lineBroker, lineSandbox:
		*l = lineName(v)
		return nil
	}
	return fmt.Errorf("must be %s or %s", lineBroker, lineSandbox)
}

func openLine(ctx context.Context, line lineName, out io.Writer, f func(*migrate.Migrator, driver.Config, io.Writer) error) error {
	var cfg driver.Config
	if err := envconfig.Process("APP", &cfg); err != nil {
		return fmt.Errorf("reading database configuration: %w", err)
	}
	var (
		m       *migrate.Migrator
		closeFn func() error
		err     error
	)
	if line == lineSandbox {
		m, closeFn, err = driver.OpenLineMigrator(ctx, cfg, func(d string) (migrate.Line, error) {
			fsys, err := durablesql.Migrations(d)
			return migrate.Line{Table: durablesql.VersionTable, Migrations: fsys}, err
		})
	} else {
		m, closeFn, err = driver.OpenMigrator(ctx, cfg)
	}
	if err != nil {
		return err
	}
	defer func() { _ = closeFn() }()
	return f(m, cfg, out)
}
