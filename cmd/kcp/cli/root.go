// Package cli is the kcp command tree. Run executes one command line with the given streams and
// environment, so tests run kcp in-process exactly as the binary does.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/observe"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// IO is what a command line runs with.
type IO struct {
	Out, Err io.Writer
	// Getenv reads the environment (os.Getenv in the binary).
	Getenv func(string) string
	// Width, when set, is the terminal width tables fit (else the terminal's, or COLUMNS).
	Width int
}

// Config is how kcp reaches the broker: flags, then KCP_* variables, then the config file.
type Config struct {
	URL      string `json:"url"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// Token is an OIDC bearer token (sent as Authorization: Bearer).
	Token string `json:"token,omitempty"`
	// The OIDC issuer and client of kcp login (see login.go).
	OIDCIssuerURL    string `json:"oidc-issuer-url,omitempty"`
	OIDCClientID     string `json:"oidc-client-id,omitempty"`
	OIDCClientSecret string `json:"oidc-client-secret,omitempty"`

	// login, when set, gives the bearer token: the cached kcp login, refreshed when it expires.
	login *login
}

type app struct {
	io         IO
	configPath string
	flags      Config
	output     string
	timeout    time.Duration
	client     *client
}

// Run executes args and returns the exit code (0 ok, 1 error, 2 usage).
func Run(ctx context.Context, args []string, streams IO) int {
	if streams.Getenv == nil {
		streams.Getenv = func(string) string { return "" }
	}
	a := &app{io: streams}
	root := a.root()
	root.SetArgs(args)
	root.SetOut(streams.Out)
	root.SetErr(streams.Err)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(streams.Err, "Error:", err)
		var usage *usageError
		if errors.As(err, &usage) {
			return 2
		}
		return 1
	}
	return 0
}

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

func (a *app) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "kcp",
		Short: "Operate the Kyma Environment Broker's fleet: runtimes, upgrades, events, kubeconfigs, expiry",
		Long: `kcp talks to the Kyma Environment Broker's operator API.

Credentials come from flags, then the environment (KCP_URL, KCP_USERNAME, KCP_PASSWORD, KCP_TOKEN),
then the config file (--config, KCP_CONFIG, default ~/.kcp/config.yaml) with the keys url,
username, password and token. A token is an OIDC bearer token; otherwise basic auth is used.
With an OIDC issuer set (--oidc-issuer-url, KCP_OIDC_ISSUER_URL or oidc-issuer-url), commands send
the login that kcp login cached (refreshed when it expires) instead of basic auth.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			switch a.output {
			case "table", "json", "yaml":
			default:
				return usagef("--output: must be table, json or yaml, got %q", a.output)
			}
			if cmd.Annotations["offline"] == "true" {
				return nil
			}
			cfg, err := a.resolve()
			if err != nil {
				return err
			}
			a.client = newClient(cfg, a.timeout)
			return nil
		},
	}
	f := root.PersistentFlags()
	f.StringVar(&a.configPath, "config", "", "config file (default $KCP_CONFIG or ~/.kcp/config.yaml)")
	f.StringVarP(&a.flags.URL, "url", "u", "", "broker URL, e.g. https://kyma-env-broker.example.com ($KCP_URL)")
	f.StringVar(&a.flags.Username, "username", "", "basic auth user ($KCP_USERNAME)")
	f.StringVar(&a.flags.Password, "password", "", "basic auth password ($KCP_PASSWORD)")
	f.StringVar(&a.flags.Token, "token", "", "OIDC bearer token ($KCP_TOKEN)")
	a.addOIDCFlags(f)
	f.StringVarP(&a.output, "output", "o", "table", "output format: table, json or yaml")
	f.DurationVar(&a.timeout, "timeout", 30*time.Second, "timeout of each request to the broker")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{msg: err.Error()} })
	observe.AddVersion(root)
	for _, c := range root.Commands() {
		if c.Name() == "version" {
			c.Annotations = map[string]string{"offline": "true"} // no broker needed
		}
	}
	root.AddCommand(a.loginCmd())
	root.AddCommand(a.runtimesCmd(), a.orchestrationsCmd(), a.upgradeCmd(), a.eventsCmd(), a.kubeconfigCmd(), a.expireCmd())
	return root
}

// resolve merges flags, KCP_* variables and the config file (in that order of precedence).
func (a *app) resolve() (Config, error) {
	file, err := a.configFile()
	if err != nil {
		return Config{}, err
	}
	pick := a.pick
	cfg := Config{
		URL:      pick(a.flags.URL, "KCP_URL", file.URL),
		Username: pick(a.flags.Username, "KCP_USERNAME", file.Username),
		Password: pick(a.flags.Password, "KCP_PASSWORD", file.Password),
		Token:    pick(a.flags.Token, "KCP_TOKEN", file.Token),
	}
	if cfg.URL == "" {
		return Config{}, usagef("no broker URL: set --url, KCP_URL or url in the config file")
	}
	if !strings.HasPrefix(cfg.URL, "http://") && !strings.HasPrefix(cfg.URL, "https://") {
		return Config{}, usagef("--url: must start with http:// or https://, got %q", cfg.URL)
	}
	cfg.URL = strings.TrimRight(cfg.URL, "/")
	// An explicit token wins; else the cached login, when there is one or nothing else to use.
	oidc, err := a.oidc(file)
	if err != nil {
		return Config{}, err
	}
	if cfg.Token == "" && oidc.enabled() {
		l, err := a.newLogin(oidc)
		if err != nil {
			return Config{}, err
		}
		if l.exists() || (cfg.Username == "" && cfg.Password == "") {
			cfg.login, cfg.Username, cfg.Password = l, "", ""
		}
	}
	return cfg, nil
}

// configFile reads the config file (--config, KCP_CONFIG, else ~/.kcp/config.yaml if present).
func (a *app) configFile() (Config, error) {
	path := a.configPath
	explicit := path != ""
	if path == "" {
		path = a.io.Getenv("KCP_CONFIG")
		explicit = path != ""
	}
	if path == "" {
		if home, err := os.UserHomeDir(); err == nil {
			path = filepath.Join(home, ".kcp", "config.yaml")
		}
	}
	var file Config
	if path != "" {
		raw, err := os.ReadFile(path)
		switch {
		case err == nil:
			if err := yaml.UnmarshalStrict(raw, &file); err != nil {
				return Config{}, fmt.Errorf("reading config file %s: %w", path, err)
			}
		case !errors.Is(err, os.ErrNotExist) || explicit:
			return Config{}, fmt.Errorf("reading config file: %w", err)
		}
	}
	return file, nil
}
