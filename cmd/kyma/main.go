// Command kyma is the module CLI: it creates, signs, publishes, lists, enables and deploys Kyma
// modules (kyma alpha ...). The logic lives in internal/module; this is flags and output.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/module"
	"github.com/kyma-project/kyma-environment-broker/internal/observe"
	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot(os.Stdout, os.Stderr).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

// app is one run of the CLI: its output streams and global flags (no package state, so tests
// can run many in one process).
type app struct {
	out, errOut io.Writer
	timeout     time.Duration
	verbose     bool
}

func (a *app) log() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(a.errOut)
	l.SetLevel(logrus.WarnLevel)
	if a.verbose {
		l.SetLevel(logrus.DebugLevel)
	}
	return l
}

// ctx bounds a command by --timeout.
func (a *app) ctx(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), a.timeout)
}

func (a *app) printf(format string, args ...any) { fmt.Fprintf(a.out, format, args...) }

func newRoot(out, errOut io.Writer) *cobra.Command {
	a := &app{out: out, errOut: errOut}
	root := &cobra.Command{
		Use:           "kyma",
		Short:         "Build, sign, publish and enable Kyma modules",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.PersistentFlags().DurationVar(&a.timeout, "timeout", 10*time.Minute, "Bound on the whole command (registry and cluster calls, --wait)")
	root.PersistentFlags().BoolVarP(&a.verbose, "verbose", "v", false, "Debug logs on stderr")

	observe.AddVersion(root)
	alpha := &cobra.Command{Use: "alpha", Short: "Module commands"}
	root.AddCommand(alpha)
	verb := func(use, short string, sub ...*cobra.Command) *cobra.Command {
		c := &cobra.Command{Use: use, Short: short}
		c.AddCommand(sub...)
		alpha.AddCommand(c)
		return c
	}
	verb("create", "Create a module or a signing key", a.createModuleCmd(), a.createKeyCmd())
	verb("push", "Push a module from a local archive", a.pushModuleCmd())
	verb("pull", "Pull a module into a local archive", a.pullModuleCmd())
	verb("sign", "Sign a module", a.signModuleCmd())
	verb("verify", "Verify a module's signature and content", a.verifyModuleCmd())
	verb("template", "Write the ModuleTemplate of a module", a.templateModuleCmd())
	verb("list", "List modules", a.listModuleCmd())
	verb("enable", "Enable a module on a cluster", a.enableModuleCmd())
	verb("disable", "Disable a module on a cluster", a.disableModuleCmd())
	alpha.AddCommand(a.deployCmd())
	return root
}

// registryFlags are the flags of every command that talks to a registry.
type registryFlags struct {
	registry, caFile, credentials, nameMapping string
	insecure                                   bool
}

func (f *registryFlags) add(c *cobra.Command) {
	c.Flags().StringVar(&f.registry, "registry", "", "OCI registry: host[:port][/prefix]")
	c.Flags().BoolVar(&f.insecure, "insecure", false, "Plain HTTP to the registry")
	c.Flags().StringVar(&f.caFile, "ca-file", "", "PEM CA certificate to trust for the registry's TLS")
	c.Flags().StringVarP(&f.credentials, "credentials", "c", "", "Registry credentials user:password (default: $KYMA_REGISTRY_USERNAME/$KYMA_REGISTRY_PASSWORD, then the docker config)")
	c.Flags().StringVar(&f.nameMapping, "name-mapping", module.NameMappingURLPath, "Component name to repository: urlPath or sha256-digest")
}

// open connects to the registry (nil, nil without --registry).
func (f *registryFlags) open(a *app) (*module.Registry, error) {
	if f.registry == "" {
		return nil, nil
	}
	o := module.RegistryOptions{Registry: f.registry, Insecure: f.insecure, CAFile: f.caFile, NameMapping: f.nameMapping}
	switch {
	case f.credentials != "":
		user, pass, ok := strings.Cut(f.credentials, ":")
		if !ok {
			return nil, errors.New("--credentials: want user:password")
		}
		o.Username, o.Password = user, pass
	case os.Getenv("KYMA_REGISTRY_USERNAME") != "":
		o.Username, o.Password = os.Getenv("KYMA_REGISTRY_USERNAME"), os.Getenv("KYMA_REGISTRY_PASSWORD")
	}
	return module.NewRegistry(o, a.log())
}

// source is a module read from a local archive (--path) or a registry (NAME:VERSION --registry).
type source struct {
	registryFlags
	path string
}

func (s *source) add(c *cobra.Command) {
	s.registryFlags.add(c)
	c.Flags().StringVar(&s.path, "path", "", "Local archive (OCI layout directory) instead of a registry")
}

func (s *source) load(ctx context.Context, a *app, args []string) (*module.Artifact, *module.Registry, error) {
	reg, err := s.open(a)
	if err != nil {
		return nil, nil, err
	}
	if s.path != "" {
		version := ""
		if len(args) == 1 {
			_, version, _ = strings.Cut(args[0], ":")
		}
		art, err := module.LoadArchive(ctx, s.path, version)
		return art, reg, err
	}
	if reg == nil || len(args) != 1 {
		return nil, nil, errors.New("give NAME:VERSION with --registry, or --path")
	}
	name, version, ok := strings.Cut(args[0], ":")
	if !ok {
		return nil, nil, fmt.Errorf("%q: want NAME:VERSION", args[0])
	}
	art, err := reg.Get(ctx, name, version)
	return art, reg, err
}

func since(t time.Time) string { return time.Since(t).Round(time.Millisecond).String() }
