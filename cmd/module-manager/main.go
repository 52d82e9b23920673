// Command module-manager installs the Kyma modules that Kyma resources enable (see
// internal/modulemanager and docs/user/modules.md). kyma alpha deploy sets it up on a cluster.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/module"
	"github.com/kyma-project/kyma-environment-broker/internal/modulemanager"
	"github.com/kyma-project/kyma-environment-broker/internal/observe"
	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func newCmd() *cobra.Command {
	var kubeconfig, configRef, logLevel string
	var keyFiles []string
	cfg := modulemanager.Config{}
	c := &cobra.Command{
		Use:           "module-manager",
		Short:         "Install the Kyma modules that Kyma resources enable",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := logrus.New()
			level, err := logrus.ParseLevel(logLevel)
			if err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			log.SetLevel(level)
			cfg.Log = log
			rc, err := module.RESTConfig(kubeconfig)
			if err != nil {
				return err
			}
			for _, f := range keyFiles {
				data, err := os.ReadFile(f)
				if err != nil {
					return fmt.Errorf("read public key: %w", err)
				}
				keys, err := modulemanager.ParsePublicKeys(data)
				if err != nil {
					return fmt.Errorf("public key %s: %w", f, err)
				}
				cfg.PublicKeys = append(cfg.PublicKeys, keys...)
			}
			if configRef != "" {
				kube, err := kubernetes.NewForConfig(rc)
				if err != nil {
					return fmt.Errorf("kubernetes client: %w", err)
				}
				if err := modulemanager.LoadClusterConfig(cmd.Context(), kube, configRef, &cfg); err != nil {
					return err
				}
			}
			if len(cfg.PublicKeys) == 0 {
				return errors.New("no public keys: give --public-key or --config with keys (modules are only installed when their signature verifies)")
			}
			m, err := modulemanager.New(rc, cfg)
			if err != nil {
				return err
			}
			return m.Run(cmd.Context())
		},
	}
	f := c.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "Kubeconfig file (default: in-cluster, $KUBECONFIG, then ~/.kube/config)")
	f.StringVar(&configRef, "config", "", "NAMESPACE/NAME of the ConfigMap kyma alpha deploy writes (public keys, plain-HTTP registries, registry Secret)")
	f.StringArrayVar(&keyFiles, "public-key", nil, "PEM file of RSA public keys modules must be signed with (repeatable)")
	f.StringVar(&cfg.Namespace, "namespace", "", "Only reconcile Kyma resources of this namespace (default: all)")
	f.StringVar(&cfg.RegistrySecret, "registry-secret", "", "NAMESPACE/NAME of a Secret with registry credentials (docker config or username/password)")
	f.StringArrayVar(&cfg.PlainHTTPRegistries, "plain-http-registry", nil, "Registry host reached over plain HTTP (repeatable)")
	f.StringVar(&cfg.CAFile, "ca-file", "", "PEM CA certificate to trust for registries' TLS")
	f.DurationVar(&cfg.Resync, "resync", 30*time.Second, "Reconcile every Kyma resource at least this often")
	f.DurationVar(&cfg.Requeue, "requeue", time.Second, "Look at a Processing module again after this long")
	f.IntVar(&cfg.Workers, "workers", 2, "Kyma resources reconciled in parallel")
	f.StringVar(&logLevel, "log-level", "info", "Log level")
	observe.AddVersion(c)
	return c
}
