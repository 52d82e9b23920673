// Package app is the broker process: it reads the configuration, wires storage, the step engine,
// the embedded provisioner, the external systems (or the sandbox) and the HTTP API, and serves
// until its context ends. cmd/broker runs it; tests run it in a child process to kill it.
package app

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/kyma-project/kyma-environment-broker/internal/broker"
	"github.com/kyma-project/kyma-environment-broker/internal/broker/auth"
	"github.com/kyma-project/kyma-environment-broker/internal/catalog"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/externals"
	"github.com/kyma-project/kyma-environment-broker/internal/lifecycle"
	"github.com/kyma-project/kyma-environment-broker/internal/logging"
	"github.com/kyma-project/kyma-environment-broker/internal/observe"
	"github.com/kyma-project/kyma-environment-broker/internal/orchestration"
	"github.com/kyma-project/kyma-environment-broker/internal/process/definitions"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/profiling"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	provconfig "github.com/kyma-project/kyma-environment-broker/internal/provisioner/config"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/kyma-project/kyma-environment-broker/internal/secretfile"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/sirupsen/logrus"
)

// Config is the broker process's own configuration (APP_*).
type Config struct {
	Host string `envconfig:"HOST" default:"127.0.0.1"`
	Port int    `envconfig:"PORT" default:"8080"`
	// StatusAddress (host:port), when set, serves /healthz, /readyz and /metrics on a listener of
	// their own as well, so that probes and scrapes reach a port the OSB API's ingress and
	// network policy need not open.
	StatusAddress string `envconfig:"STATUS_ADDRESS"`
	// ProvisionerURL points at a remote provisioner's GraphQL API; empty embeds it.
	ProvisionerURL string        `envconfig:"PROVISIONER_URL"`
	PollInterval   time.Duration `envconfig:"BROKER_POLL_INTERVAL" default:"2s"`
	// CredentialsFile keeps the basic-auth credentials generated when APP_BROKER_USERNAME and
	// APP_BROKER_PASSWORD are not set, so that they survive restarts (like the SQLite key file).
	CredentialsFile string `envconfig:"BROKER_CREDENTIALS_FILE" default:"keb.credentials"`
	// MaxBodyBytes bounds every request body (413 beyond it).
	MaxBodyBytes int64 `envconfig:"HTTP_MAX_BODY_BYTES" default:"1048576"`
	// ReadTimeout bounds reading a whole request, body included: a client that trickles its body
	// cannot hold a connection longer. ReadHeaderTimeout bounds the headers alone.
	ReadTimeout       time.Duration `envconfig:"HTTP_READ_TIMEOUT" default:"30s"`
	ReadHeaderTimeout time.Duration `envconfig:"HTTP_READ_HEADER_TIMEOUT" default:"10s"`
	// WriteTimeout bounds writing an answer; IdleTimeout how long a kept-alive connection waits.
	WriteTimeout time.Duration `envconfig:"HTTP_WRITE_TIMEOUT" default:"60s"`
	IdleTimeout  time.Duration `envconfig:"HTTP_IDLE_TIMEOUT" default:"2m"`
	// RequestTimeout bounds every request: one still running is answered 503 with Retry-After
	// before a client's typical 30 s timeout, and its work cancelled (Routes.RequestTimeout).
	RequestTimeout time.Duration `envconfig:"HTTP_REQUEST_TIMEOUT" default:"25s"`
	// ReadinessTimeout bounds one /readyz check; StorageProbeInterval is how often the database's
	// writability is probed besides (a full disk: logged once, keb_storage_full).
	ReadinessTimeout     time.Duration `envconfig:"READINESS_TIMEOUT" default:"10s"`
	StorageProbeInterval time.Duration `envconfig:"STORAGE_PROBE_INTERVAL" default:"10s"`
	// The parts below are read separately (see load): envconfig would otherwise prefix their
	// variables with the field name.
	Broker   broker.Config                `ignored:"true"`
	Runtime  provisioning.RuntimeDefaults `ignored:"true"`
	Plans    catalog.Config               `ignored:"true"`
	Auth     auth.Config                  `ignored:"true"`
	Database driver.Config                `ignored:"true"`
	Engine   engine.Config                `ignored:"true"`
	Backends infrastructure.Config        `ignored:"true"`
	// Lifecycle are the expiry and re-trigger jobs (APP_LIFECYCLE_*).
	Lifecycle lifecycle.Config `ignored:"true"`
	// Orchestration tunes the orchestration scheduler (APP_ORCHESTRATION_*).
	Orchestration orchestration.Config `ignored:"true"`
	// SandboxURL points every external system at the stand-ins of a sandbox served elsewhere
	// (cmd/sandbox, http://host:port) with their default credentials, instead of embedding one:
	// replicas then share one sandbox that does not stop with any of them.
	SandboxURL string `envconfig:"SANDBOX_URL"`
	// Externals are read by externals.Load (APP_AVS_*, APP_SANDBOX_*, ...).
	Externals externals.Config `ignored:"true"`
	// Profiling is the opt-in CPU profile and pprof server (APP_CPU_PROFILE, APP_PPROF_ADDRESS).
	Profiling profiling.Config `ignored:"true"`
}

// listenerTimeouts are the broker listener's read, header and idle timeouts, which the embedded
// sandbox's listeners (in the same process) get too.
func (c Config) listenerTimeouts() standins.Timeouts {
	return standins.Timeouts{ReadHeader: c.ReadHeaderTimeout, Read: c.ReadTimeout, Idle: c.IdleTimeout}
}

// Load reads every part from APP_* variables (APP_RUNTIME_* for the runtime defaults).
func Load() (Config, error) {
	var cfg Config
	parts := []struct {
		prefix string
		into   any
	}{
		{"APP", &cfg}, {"APP", &cfg.Broker}, {"APP_RUNTIME", &cfg.Runtime}, {"APP", &cfg.Plans}, {"APP", &cfg.Auth},
		{"APP", &cfg.Database}, {"APP", &cfg.Engine}, {"APP", &cfg.Backends}, {"APP", &cfg.Orchestration},
		{"APP", &cfg.Lifecycle}, {"APP", &cfg.Profiling},
	}
	for _, p := range parts {
		if err := envconfig.Process(p.prefix, p.into); err != nil {
			return cfg, fmt.Errorf("reading configuration: %w", err)
		}
	}
	ext, err := externals.Load()
	cfg.Externals = ext
	return cfg, err
}

// Serve runs the broker until ctx ends: Build, then Run.
func Serve(ctx context.Context, cfg Config, log *logrus.Logger) error {
	a, err := Build(ctx, cfg, log, Overrides{})
	if err != nil {
		return err
	}
	defer a.Close()
	return a.Run(ctx)
}

// provisionerClient embeds the provisioner (its processes run on the broker's engine, or on
// an engine of their own it returns when APP_ENQUEUE_IN_PROGRESS_OPERATIONS is false) or
// connects to a remote one.
func provisionerClient(ctx context.Context, cfg Config, store storage.Store, eng *engine.Engine, built externals.Built, log logrus.FieldLogger, adjust func(*provisioner.Options)) (client.Client, *engine.Engine, error) {
	if cfg.ProvisionerURL != "" {
		// traceparent goes along: the provisioner's spans join the broker's step that called it.
		return client.NewGraphQL(cfg.ProvisionerURL, &http.Client{Timeout: 30 * time.Second, Transport: observe.Transport(nil)}), nil, nil
	}
	start := time.Now()
	provCfg, err := provconfig.Load()
	if err != nil {
		return nil, nil, err
	}
	opts := provisioner.Options{
		Config: provCfg, Backends: cfg.Backends, PollInterval: cfg.PollInterval, Log: log,
		DirectorRetryTime: cfg.Externals.Settings.RetryTime, DirectorCleanupTime: cfg.Externals.Settings.CleanupRetryTime,
	}
	if built.Director != nil {
		opts.Director = built.Director
	}
	if adjust != nil {
		adjust(&opts)
	}
	p, err := provisioner.New(ctx, store, opts)
	if err != nil {
		return nil, nil, err
	}
	own, err := p.Embed(eng, store, cfg.Engine, start, log)
	if err != nil {
		return nil, nil, err
	}
	return client.NewInProcess(p.Service), own, nil
}

func registerProcesses(eng *engine.Engine, store storage.Store, prov client.Client, cfg Config, built externals.Built) error {
	defs, err := definitions.Broker(definitions.Deps{
		Store: store, Provisioner: prov, PollInterval: cfg.PollInterval, Runtime: cfg.Runtime, Timeout: cfg.Broker.OperationTimeout,
		UpgradeTimeout: cfg.Broker.UpgradeTimeout, Systems: built.Systems, Overrides: built.Overrides,
		Limits: provisioning.Limits{CallTimeout: cfg.Externals.Settings.CallTimeout, ReconcileTimeout: cfg.Externals.Settings.ReconcileTimeout},
	})
	if err != nil {
		return err
	}
	return definitions.Register(eng, defs)
}

// externalSystems builds the external systems' clients; with the sandbox enabled (the default)
// it first serves the stand-ins on APP_SANDBOX_ADDRESS (plain HTTP) and APP_SANDBOX_TLS_ADDRESS
// (the Connector and the runtimes' mutual-TLS endpoints) with the broker listener's timeouts, with their state in the broker's
// database (objects) so that in-flight operations find it after a restart, and points every
// client at them. reach, when set, does this instead.
func externalSystems(ctx context.Context, cfg externals.Config, timeouts standins.Timeouts, log logrus.FieldLogger, objects durable.Store,
	reach func(context.Context, *externals.Config, durable.Store) (func(), error), certs *observe.CertificateExpiry) (externals.Built, func(), error) {
	stop := func() {}
	if reach != nil {
		var err error
		if stop, err = reach(ctx, &cfg, objects); err != nil {
			return externals.Built{}, func() {}, err
		}
	} else if cfg.Settings.SandboxEnabled {
		l, err := standins.Listen(ctx, standins.Options{Log: log, Seed: uint64(time.Now().UnixNano()), Store: objects, Admin: cfg.Settings.AdminConfig, Timeouts: timeouts},
			cfg.Settings.SandboxAddress, cfg.Settings.SandboxTLSAddress)
		if err != nil {
			return externals.Built{}, stop, fmt.Errorf("starting the sandbox on APP_SANDBOX_ADDRESS %s and APP_SANDBOX_TLS_ADDRESS %s: %w",
				cfg.Settings.SandboxAddress, cfg.Settings.SandboxTLSAddress, err)
		}
		stop = func() {
			shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = l.Shutdown(shutdownCtx)
		}
		if err := watchSandboxCertificates(certs, l); err != nil {
			stop()
			return externals.Built{}, func() {}, err
		}
		standins.PointAt(&cfg, l.URL, standins.DefaultCredentials())
		// The clients reach the stand-ins without the network; the listener serves everyone else.
		cfg.SetTransport(l.Transport(clientkit.PooledTransport()))
		log.WithFields(logrus.Fields{"address": l.URL, "tlsAddress": l.TLSURL, "systems": l.Sandbox.Systems(),
			"adminCredentials": cfg.Settings.AdminConfig.Enabled()}).
			Info("sandbox serving the external systems (APP_SANDBOX_ENABLED=false to use real ones); inspect it at " + l.URL +
				"/_sandbox/; its CA is at " + l.URL + "/_sandbox/connector/ca.pem")
	}
	built, err := cfg.Build()
	if err != nil {
		stop()
		return built, func() {}, err
	}
	return built, stop, nil
}

// watchSandboxCertificates exports the expiry of the embedded sandbox's CA and of its TLS
// listener's certificate.
func watchSandboxCertificates(certs *observe.CertificateExpiry, l *standins.Listeners) error {
	block, _ := pem.Decode(l.CAPEM())
	if block == nil {
		return errors.New("reading the sandbox CA: no PEM certificate")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("reading the sandbox CA: %w", err)
	}
	if err := certs.Watch("sandbox-connector-ca", func() []*x509.Certificate { return []*x509.Certificate{ca} }); err != nil {
		return err
	}
	return certs.Watch("sandbox-tls", func() []*x509.Certificate { return []*x509.Certificate{l.TLSCertificate} })
}

// authRoutes builds the middlewares: basic auth on /v2 (credentials generated and printed when
// none are configured), JWT on /oauth when an issuer is configured (basic there too when
// allowed or when no issuer is configured), and the operator endpoints with either.
func authRoutes(ctx context.Context, cfg *Config, log logrus.FieldLogger) (authenticated, error) {
	if !cfg.Auth.BasicEnabled() {
		password, created, err := secretfile.ReadOrCreate(cfg.CredentialsFile, func() (string, error) {
			secret := make([]byte, 16)
			if _, err := rand.Read(secret); err != nil {
				return "", err
			}
			return hex.EncodeToString(secret), nil
		})
		if err != nil {
			return authenticated{}, fmt.Errorf("APP_BROKER_CREDENTIALS_FILE: %w", err)
		}
		cfg.Auth.Username, cfg.Auth.Password = generatedUser, password
		file := cfg.CredentialsFile
		if abs, err := filepath.Abs(file); err == nil {
			file = abs
		}
		// Said in the log, not only on a terminal: in a container without a shell the log is
		// all an operator sees. The password itself stays out of it.
		log.WithFields(logrus.Fields{"file": file, "user": generatedUser, "generated_now": created}).
			Infof("no APP_BROKER_USERNAME/APP_BROKER_PASSWORD: basic auth is user %s with the password kept in %s; "+
				"read it with `cat %s`, from a container with `docker cp CONTAINER:%s - | tar -xO`, or set APP_BROKER_PASSWORD instead",
				generatedUser, file, file, file)
	}
	basic, err := auth.NewBasic(cfg.Auth.Username, cfg.Auth.Password, auth.WithLogger(log))
	if err != nil {
		return authenticated{}, err
	}
	if !cfg.Auth.OIDCEnabled() {
		log.Info("no APP_BROKER_OIDC_ISSUER: /oauth routes accept basic auth")
		return authenticated{v2: basic, oauth: basic, Routes: Routes{OperatorAuth: basic}}, nil
	}
	verifier, err := auth.NewVerifier(ctx, cfg.Auth, &http.Client{Timeout: 10 * time.Second}, auth.WithLogger(log))
	if err != nil {
		return authenticated{}, err
	}
	oauth := verifier.Require(cfg.Auth.Scope())
	if cfg.Auth.AllowBasicOnOAuth {
		oauth = auth.Either(basic, oauth)
	}
	return authenticated{v2: basic, oauth: oauth, Routes: Routes{OperatorAuth: auth.Either(basic, verifier.RequireGroup(cfg.Auth.AdminGroup()))}}, nil
}

// authenticated are the OSB API's middlewares and the routes with the operator's.
type authenticated struct {
	v2, oauth broker.Middleware
	Routes
}

// generatedUser is the basic-auth user when the credentials are generated.
const generatedUser = "broker"

// announce prints, on a terminal, where everything is and how to log in; elsewhere the log says it.
func announce(cfg Config, log logrus.FieldLogger) {
	base := "http://" + net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
	if !logging.IsTerminal(os.Stdout) {
		return
	}
	fmt.Printf("\nKyma Environment Broker is running\n")
	fmt.Printf("  OSB API:       %s/oauth/v2  (header X-Broker-API-Version: 2.16)\n", base)
	fmt.Printf("  operator API:  %s/runtimes, %s/events\n", base, base)
	if cfg.Externals.Settings.SandboxEnabled {
		fmt.Printf("  sandbox:       http://%s/_sandbox/  (stand-ins of the external systems)\n", cfg.Externals.Settings.SandboxAddress)
	}
	if cfg.Auth.Password != "" {
		fmt.Printf("  credentials:   %s / %s", cfg.Auth.Username, cfg.Auth.Password)
		if cfg.Auth.Username == generatedUser {
			fmt.Printf("  (generated, kept in %s)", cfg.CredentialsFile)
		}
		fmt.Println()
	}
	fmt.Printf("  logs:          %s level (APP_LOG_LEVEL=debug shows every request, APP_LOG_FORMAT=json)\n\n", levelOf(log))
}

func levelOf(log logrus.FieldLogger) string {
	if l, ok := log.(*logrus.Logger); ok {
		return l.GetLevel().String()
	}
	return "info"
}
