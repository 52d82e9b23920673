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
	"k8s.io/apimachinery/pkg/api/resource"
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

// defaultTimeout bounds every command unless --timeout says otherwise.
const defaultTimeout = 10 * time.Minute

// moduleAliases are the real CLI's aliases of the module subcommands.
var moduleAliases = []string{"mod", "mods", "modules"}

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
	root.PersistentFlags().DurationVar(&a.timeout, "timeout", defaultTimeout, "Bound on the whole command (registry and cluster calls, --wait)")
	root.PersistentFlags().BoolVarP(&a.verbose, "verbose", "v", false, "Debug logs on stderr")

	observe.AddVersion(root)
	alpha := &cobra.Command{Use: "alpha", Short: "Module commands"}
	root.AddCommand(alpha)
	verb := func(use, short string, sub ...*cobra.Command) *cobra.Command {
		c := &cobra.Command{Use: use, Short: short}
		for _, s := range sub {
			if s.Name() == "module" && len(s.Aliases) == 0 {
				s.Aliases = moduleAliases
			}
		}
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
	registry, caFile, credentials, token, nameMapping, maxSize string
	insecure                                                   bool
}

func (f *registryFlags) add(c *cobra.Command) {
	c.Flags().StringVar(&f.registry, "registry", "", "OCI registry: [http://|https://]host[:port][/prefix] (http:// means plain HTTP)")
	c.Flags().BoolVar(&f.insecure, "insecure", false, "Plain HTTP to the registry")
	c.Flags().StringVar(&f.caFile, "ca-file", "", "PEM CA certificate to trust for the registry's TLS")
	c.Flags().StringVarP(&f.credentials, "credentials", "c", "", "Registry credentials user:password (default: $KYMA_REGISTRY_USERNAME/$KYMA_REGISTRY_PASSWORD, then the docker config)")
	c.Flags().StringVarP(&f.token, "token", "t", "", "Registry token, used as the password (user from --credentials or $KYMA_REGISTRY_USERNAME)")
	c.Flags().StringVar(&f.nameMapping, "name-mapping", module.NameMappingURLPath, "Component name to repository: urlPath or sha256-digest")
	c.Flags().StringVar(&f.maxSize, "max-resource-size", "1Gi", "Largest resource (file, directory or layer) accepted, e.g. 500Mi")
}

// maxResourceSize parses --max-resource-size.
func (f *registryFlags) maxResourceSize() (int64, error) {
	q, err := resource.ParseQuantity(f.maxSize)
	if err != nil || q.Value() <= 0 {
		return 0, fmt.Errorf("--max-resource-size %q: want a size like 500Mi or 2Gi", f.maxSize)
	}
	return q.Value(), nil
}

// open connects to the registry (nil, nil without --registry).
func (f *registryFlags) open(a *app) (*module.Registry, error) {
	if f.registry == "" {
		return nil, nil
	}
	max, err := f.maxResourceSize()
	if err != nil {
		return nil, err
	}
	o := module.RegistryOptions{Registry: f.registry, Insecure: f.insecure, CAFile: f.caFile, NameMapping: f.nameMapping, MaxResourceSize: max}
	switch {
	case f.credentials != "":
		user, pass, ok := strings.Cut(f.credentials, ":")
		if !ok && f.token == "" {
			return nil, errors.New("--credentials: want user:password")
		}
		o.Username, o.Password = user, pass
	case os.Getenv("KYMA_REGISTRY_USERNAME") != "":
		o.Username, o.Password = os.Getenv("KYMA_REGISTRY_USERNAME"), os.Getenv("KYMA_REGISTRY_PASSWORD")
	}
	if f.token != "" {
		// As the real CLI: the token is the password.
		o.Password = f.token
	}
	return module.NewRegistry(o, a.log())
}

// source is a module read from a local archive (--path) or a registry (NAME:VERSION or --name
// and --version, with --registry).
type source struct {
	registryFlags
	path, name, version string
}

func (s *source) add(c *cobra.Command) {
	s.registryFlags.add(c)
	c.Flags().StringVarP(&s.path, "path", "p", "", "Local archive (OCI layout directory) instead of a registry")
}

// addNameVersion adds the real CLI's --name and --version (instead of NAME:VERSION).
func (s *source) addNameVersion(c *cobra.Command) {
	c.Flags().StringVar(&s.name, "name", "", "Component name of the module (instead of NAME:VERSION)")
	c.Flags().StringVar(&s.version, "version", "", "Version of the module (instead of NAME:VERSION)")
}

// nameVersion is what the arguments and flags name ("" for what they leave open).
func (s *source) nameVersion(args []string) (string, string, error) {
	name, version := s.name, s.version
	if len(args) == 1 {
		n, v, ok := strings.Cut(args[0], ":")
		if !ok && s.path == "" {
			return "", "", fmt.Errorf("%q: want NAME:VERSION", args[0])
		}
		if (name != "" && name != n) || (version != "" && version != v) {
			return "", "", fmt.Errorf("%q and --name/--version name different modules", args[0])
		}
		name, version = n, v
	}
	return name, version, nil
}

func (s *source) load(ctx context.Context, a *app, args []string) (*module.Artifact, *module.Registry, error) {
	reg, err := s.open(a)
	if err != nil {
		return nil, nil, err
	}
	name, version, err := s.nameVersion(args)
	if err != nil {
		return nil, nil, err
	}
	if s.path != "" {
		art, err := module.LoadArchive(ctx, s.path, name, version)
		return art, reg, err
	}
	if reg == nil || name == "" || version == "" {
		return nil, nil, errors.New("give NAME:VERSION (or --name and --version) with --registry, or --path")
	}
	art, err := reg.Get(ctx, name, version)
	return art, reg, err
}

func since(t time.Time) string { return time.Since(t).Round(time.Millisecond).String() }
