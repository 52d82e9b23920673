package app

import (
	"context"
	"errors"
	"fmt"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durablesql"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/apidoc"
	"github.com/kyma-project/kyma-environment-broker/internal/broker"
	"github.com/kyma-project/kyma-environment-broker/internal/catalog"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/console"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/externals"
	"github.com/kyma-project/kyma-environment-broker/internal/health"
	"github.com/kyma-project/kyma-environment-broker/internal/lifecycle"
	"github.com/kyma-project/kyma-environment-broker/internal/observe"
	"github.com/kyma-project/kyma-environment-broker/internal/operator"
	"github.com/kyma-project/kyma-environment-broker/internal/orchestration"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/sirupsen/logrus"
)

// Overrides are the parts of the object graph tests and benches substitute; the zero value is
// the broker process's own.
type Overrides struct {
	// Listener serves the API instead of one bound on APP_HOST:APP_PORT (an httptest server's).
	Listener net.Listener
	// Clock is the operator API's time (expiry) [the wall clock].
	Clock lifecycle.Clock
	// Provisioner adjusts the embedded provisioner's options (simulated clusters).
	Provisioner func(*provisioner.Options)
	// Systems reaches the external systems instead of serving the stand-ins on
	// APP_SANDBOX_ADDRESS (see externalSystems): it may point cfg at stand-ins of its own, and
	// returns how to stop them.
	Systems func(ctx context.Context, cfg *externals.Config, objects durable.Store) (stop func(), err error)
}

// App is the broker's object graph, built and not yet running.
type App struct {
	// Config is the configuration in effect (generated credentials, the bound address).
	Config Config
	Store  storage.Store
	// Handler is the process's router (a *Router).
	Handler  http.Handler
	Registry *prometheus.Registry

	log            logrus.FieldLogger
	listener       net.Listener
	status         net.Listener
	health         http.Handler
	engine         *engine.Engine
	provEngine     *engine.Engine
	orchestrations *orchestration.Manager
	expirer        lifecycle.Expirer
	storage        *health.Storage
	closers        []func()
}

// Build wires the broker: storage, metrics, the step engine, the external systems' clients (or
// the sandbox), the embedded provisioner, the broker's processes, authentication, the
// orchestrations, the operator API and the router. Nothing runs until Start or Run; Close
// releases what Build opened.
func Build(ctx context.Context, cfg Config, log *logrus.Logger, o Overrides) (_ *App, err error) {
	a := &App{log: log}
	// A start that fails (a taken sandbox port, a bad setting) leaves no fresh database, key or
	// credentials file behind: the next start would otherwise find a key that no one chose.
	removeCreated := createdFiles(cfg)
	defer func() {
		if err != nil {
			a.Close()
			removeCreated(log)
		}
	}()
	// Bind before anything else starts: a taken port fails at once, naming the variables, and
	// the engine's owner identity needs the bound address.
	a.listener = o.Listener
	if a.listener == nil {
		addr := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("listening on APP_HOST:APP_PORT (%s): %w; set APP_PORT (and APP_HOST) to a free address", addr, err)
		}
		a.listener = ln
		a.closers = append(a.closers, func() { ln.Close() })
	}
	if cfg.StatusAddress != "" {
		ln, err := net.Listen("tcp", cfg.StatusAddress)
		if err != nil {
			return nil, fmt.Errorf("listening on APP_STATUS_ADDRESS (%s): %w", cfg.StatusAddress, err)
		}
		a.status = ln
		a.closers = append(a.closers, func() { ln.Close() })
	}
	store, err := driver.Open(ctx, cfg.Database, log)
	if err != nil {
		return nil, err
	}
	a.Store = store
	a.closers = append(a.closers, func() { store.Close() })
	schema, err := driver.LatestSchemaVersion(cfg.Database)
	if err != nil {
		return nil, err
	}
	plans, err := catalog.FromConfig(cfg.Plans)
	if err != nil {
		return nil, err
	}
	a.Registry = prometheus.NewRegistry()
	a.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := observe.RegisterBuildInfo(a.Registry); err != nil {
		return nil, err
	}
	httpMetrics, err := observe.NewHTTPMetrics(a.Registry)
	if err != nil {
		return nil, err
	}
	certs, err := observe.NewCertificateExpiry(a.Registry)
	if err != nil {
		return nil, err
	}
	// The engine's default owner is this host and the bound address, which no other live
	// process can hold, so a restart reclaims its own leases at once.
	cfg.Engine.Address = a.listener.Addr().String()
	// An embedded provisioner's finished operations wake the broker's operations waiting for
	// them, or signal those waiting in memory.
	a.engine, err = provisioner.NewEngine(store, cfg.Engine, log, engine.WithRegisterer(a.Registry))
	if err != nil {
		return nil, err
	}
	calls, err := clientkit.NewCallMetrics(a.Registry)
	if err != nil {
		return nil, err
	}
	calls.LogTo(log)
	cfg.Externals.Instrument(calls)
	cfg.Externals.Log = log // the account pool says which it is
	objects, err := durablesql.Open(ctx, store.Database(), log)
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, func() { objects.Close() })
	if o.Systems == nil && cfg.SandboxURL != "" {
		o.Systems = func(_ context.Context, c *externals.Config, _ durable.Store) (func(), error) {
			standins.PointAt(c, cfg.SandboxURL, standins.DefaultCredentials())
			return func() {}, nil
		}
	}
	built, stopSystems, err := externalSystems(ctx, cfg.Externals, cfg.listenerTimeouts(), log, objects, o.Systems, certs)
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, stopSystems)
	prov, provEngine, err := provisionerClient(ctx, cfg, store, a.engine, built, log, o.Provisioner)
	if err != nil {
		return nil, err
	}
	a.provEngine = provEngine
	if err := registerProcesses(a.engine, store, prov, cfg, built); err != nil {
		return nil, err
	}
	routes, err := authRoutes(ctx, &cfg, log)
	if err != nil {
		return nil, err
	}
	adapter := broker.NewCatalog(plans)
	cfg.Orchestration.UpgradeTimeout = cfg.Broker.UpgradeTimeout
	a.orchestrations, err = orchestration.NewManager(store, adapter, cfg.Orchestration, log)
	if err != nil {
		return nil, err
	}
	a.expirer = lifecycle.Expirer{Store: store, ExpiryDays: lifecycle.ExpiryDays(plans), OperationTimeout: cfg.Broker.OperationTimeout}
	clock := o.Clock
	if clock == nil {
		clock = lifecycle.WallClock()
	}
	routes.Operator = operator.New(store, adapter, log, operator.WithOrchestrations(a.orchestrations),
		operator.WithProvisioner(prov), operator.WithExpirer(a.expirer), operator.WithClock(clock))
	a.storage, err = health.NewStorage(store, log, a.Registry)
	if err != nil {
		return nil, err
	}
	routes.Health = health.NewWith(store, schema, a.Registry, health.Options{Timeout: cfg.ReadinessTimeout, Storage: a.storage})
	a.health = routes.Health
	routes.APIDoc = apidoc.Handler()
	routes.RequestTimeout = cfg.RequestTimeout
	routes.Console = console.Handler()
	routes.Metrics = httpMetrics
	api := broker.NewAPI(broker.New(store, adapter, prov, cfg.Broker, log),
		broker.APIOptions{V2Auth: routes.v2, OAuthAuth: routes.oauth, MaxBodyBytes: cfg.MaxBodyBytes}, log)
	a.Handler = NewRouter(api, routes.Routes, log)
	a.Config = cfg
	return a, nil
}

// Close releases what Build opened (the listener, the stand-ins, the store), last first.
func (a *App) Close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
}

// Start runs the background work until ctx ends: the step engines, the lifecycle jobs and the
// orchestration scheduler. wait returns once they all stopped, with the engines' errors.
func (a *App) Start(ctx context.Context) (wait func() error, err error) {
	runCtx, stop := context.WithCancel(ctx)
	engineDone := make(chan error, 1)
	go func() { engineDone <- a.engine.Run(runCtx) }()
	provDone := make(chan error, 1)
	if a.provEngine != nil {
		go func() { provDone <- a.provEngine.Run(runCtx) }()
	} else {
		provDone <- nil
	}
	waitJobs, err := lifecycle.Start(runCtx, a.Config.Lifecycle, a.Store, a.expirer, a.log)
	if err != nil {
		stop()
		<-engineDone
		<-provDone
		return nil, err
	}
	// Every replica runs the scheduler; one at a time holds its lock and works.
	scheduled := make(chan error, 1)
	go func() { scheduled <- a.orchestrations.Scheduler().Run(runCtx) }()
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		every := a.Config.StorageProbeInterval
		if every <= 0 {
			every = 10 * time.Second
		}
		a.storage.Run(runCtx, every)
	}()
	return func() error {
		<-runCtx.Done()
		defer stop()
		err := errors.Join(<-engineDone, <-provDone)
		<-scheduled
		<-probed
		waitJobs()
		return err
	}, nil
}

// Run serves the API on the listener, with the background work, until ctx ends.
func (a *App) Run(ctx context.Context) error {
	srv := &http.Server{
		Handler: a.Handler, ReadHeaderTimeout: a.Config.ReadHeaderTimeout,
		ReadTimeout: a.Config.ReadTimeout, WriteTimeout: a.Config.WriteTimeout, IdleTimeout: a.Config.IdleTimeout,
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	wait, err := a.Start(runCtx)
	if err != nil {
		return err
	}
	serveDone := make(chan error, 2)
	go func() { serveDone <- srv.Serve(a.listener) }()
	servers := []*http.Server{srv}
	fields := logrus.Fields{"address": a.listener.Addr().String(), "database": a.Config.Database.Driver}
	if a.status != nil {
		status := &http.Server{Handler: a.health, ReadHeaderTimeout: a.Config.ReadHeaderTimeout,
			ReadTimeout: a.Config.ReadTimeout, WriteTimeout: a.Config.WriteTimeout, IdleTimeout: a.Config.IdleTimeout}
		servers = append(servers, status)
		go func() { serveDone <- status.Serve(a.status) }()
		fields["statusAddress"] = a.status.Addr().String()
	}
	addr := a.listener.Addr().String()
	log := a.log.WithFields(fields)
	log.Info("broker listening")
	announce(a.Config, a.log)

	select {
	case err := <-serveDone:
		if !errors.Is(err, http.ErrServerClosed) {
			stop()
			_ = wait()
			return fmt.Errorf("serving %s: %w", addr, err)
		}
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(shutdownCtx)
	}
	stop()
	return wait()
}

// createdFiles notes which of the files a start creates (the SQLite database with its journal
// files and generated key, the generated credentials) exist now; the function it returns removes
// those that did not.
func createdFiles(cfg Config) func(logrus.FieldLogger) {
	var files []string
	if cfg.Database.Driver == "" || cfg.Database.Driver == driver.SQLite {
		p := cfg.Database.Path
		files = append(files, p, p+"-wal", p+"-shm", p+"-journal", cfg.Database.KeyFile())
	}
	if !cfg.Auth.BasicEnabled() && cfg.CredentialsFile != "" {
		files = append(files, cfg.CredentialsFile)
	}
	var absent []string
	for _, f := range files {
		if _, err := os.Stat(f); errors.Is(err, fs.ErrNotExist) {
			absent = append(absent, f)
		}
	}
	return func(log logrus.FieldLogger) {
		for _, f := range absent {
			if err := os.Remove(f); err == nil {
				log.WithField("file", f).Debug("removed the file this failed start created")
			}
		}
	}
}
