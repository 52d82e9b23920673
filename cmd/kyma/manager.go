package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/modulemanager"
	"github.com/spf13/cobra"
)

// managerFlags set the module manager up on deploy.
type managerFlags struct {
	keys, plainHTTP              []string
	registry, credentials, image string
}

func (f *managerFlags) add(c *cobra.Command) {
	c.Flags().StringArrayVar(&f.keys, "manager-public-key", nil, "Set the module manager up: PEM public key modules must be signed with (repeatable)")
	c.Flags().StringVar(&f.registry, "manager-registry", "", "Registry host the manager's credentials are for")
	c.Flags().StringVar(&f.credentials, "manager-registry-credentials", "", "user:password the manager pulls modules with (a docker config Secret)")
	c.Flags().StringArrayVar(&f.plainHTTP, "manager-plain-http-registry", nil, "Registry host the manager reaches over plain HTTP (repeatable)")
	c.Flags().StringVar(&f.image, "manager-image", "", "Run the manager in the cluster from this image (ServiceAccount, cluster-admin binding, Deployment)")
}

func (f *managerFlags) set() bool {
	return len(f.keys) > 0 || f.credentials != "" || f.image != "" || len(f.plainHTTP) > 0
}

// deploy writes the manager's ConfigMap (keys, settings), its registry Secret and, with an image,
// its Deployment into the Kyma's namespace.
func (f *managerFlags) deploy(ctx context.Context, a *app, k kymaFlags) error {
	if !f.set() {
		return nil
	}
	if len(f.keys) == 0 {
		return errors.New("--manager-public-key: the module manager installs only modules signed with a configured key")
	}
	o := modulemanager.SetupOptions{Namespace: k.namespace, PlainHTTPRegistries: f.plainHTTP, RegistryHost: f.registry, Image: f.image}
	for _, file := range f.keys {
		data, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("read --manager-public-key: %w", err)
		}
		o.PublicKeys = append(o.PublicKeys, data)
	}
	if f.credentials != "" {
		user, pass, ok := strings.Cut(f.credentials, ":")
		if !ok {
			return errors.New("--manager-registry-credentials: want user:password")
		}
		o.Username, o.Password = user, pass
	}
	objs, err := modulemanager.SetupObjects(o)
	if err != nil {
		return err
	}
	cl, err := k.cluster(a)
	if err != nil {
		return err
	}
	if err := cl.ApplyObjects(ctx, objs); err != nil {
		return err
	}
	a.printf("module manager configured: ConfigMap %s/%s (run: module-manager --config %s/%s)\n", k.namespace, modulemanager.DefaultConfigName, k.namespace, modulemanager.DefaultConfigName)
	return nil
}
