// Command provisioner runs the Runtime Provisioner on its own: the GraphQL API at APP_ADDRESS
// and the step-engine workers for its operations, on the configured database.
package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/kyma-project/kyma-environment-broker/internal/gcpolicy"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/director"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/health"
	"github.com/kyma-project/kyma-environment-broker/internal/logging"
	"github.com/kyma-project/kyma-environment-broker/internal/observe"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/compass"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/compass/fromsecret"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/config"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	if observe.IsVersionArg(os.Args[1:]) {
		observe.PrintVersion(os.Stdout, "provisioner")
		return
	}
	log, err := logging.FromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	gcpolicy.Apply(log)
	if err := run(ctx, log); err != nil {
		log.WithError(err).Error("provisioner failed")
		stop()
		os.Exit(1)
	}
}

// directorClient is the Director the provisioner registers runtimes with:
//   - with APP_DIRECTOR_OAUTH_CLIENT_ID set, the real Director with the APP_DIRECTOR_OAUTH_*
//     client (the explicit override);
//   - else, when a control-plane cluster is configured (in-cluster, or KUBECONFIG), the real
//     Director with the OAuth client of the Secret APP_CREDENTIALS_NAMESPACE /
//     APP_OAUTH_CREDENTIALS_SECRET_NAME there, followed as it changes (seed 000);
//   - else a stateless local stand-in.
func directorClient(ctx context.Context, cfg config.Config, directorCfg director.Config, log logrus.FieldLogger) (compass.Client, error) {
	if directorCfg.OAuthClientID != "" {
		log.Info("Director OAuth client from APP_DIRECTOR_OAUTH_* (overrides the credentials Secret)")
		return director.New(directorCfg)
	}
	_, inCluster := os.LookupEnv("KUBERNETES_SERVICE_HOST")
	if !inCluster && os.Getenv("KUBECONFIG") == "" {
		log.Info("no control-plane cluster (not in a cluster, no KUBECONFIG) and no APP_DIRECTOR_OAUTH_CLIENT_ID: runtimes are registered with a local stand-in of the Director")
		return nil, nil
	}
	restCfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("connecting to the control-plane cluster for the Director's credentials: %w", err)
	}
	kube, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the control-plane cluster for the Director's credentials: %w", err)
	}
	return fromsecret.Start(ctx, kube, cfg.CredentialsNamespace, cfg.OAuthCredentialsSecret, directorCfg, log)
}

func run(ctx context.Context, log *logrus.Logger) error {
	start := time.Now()
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	var (
		dbCfg       driver.Config
		engineCfg   engine.Config
		setCfg      infrastructure.Config
		directorCfg director.Config
	)
	for _, c := range []any{&dbCfg, &engineCfg, &setCfg, &directorCfg} {
		if err := envconfig.Process("APP", c); err != nil {
			return fmt.Errorf("reading configuration: %w", err)
		}
	}
	store, err := driver.Open(ctx, dbCfg, log)
	if err != nil {
		return err
	}
	defer store.Close()

	opts := provisioner.Options{Config: cfg, Backends: setCfg, Log: log}
	if opts.Director, err = directorClient(ctx, cfg, directorCfg, log); err != nil {
		return err
	}
	p, err := provisioner.New(ctx, store, opts)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	if err := observe.RegisterBuildInfo(reg); err != nil {
		return err
	}
	shutdownTraces, err := observe.SetupTracing(ctx, "kyma-provisioner", os.Getenv, log)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdownTraces(sctx)
	}()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Bound before the engine starts: the engine's default owner is this host and APP_ADDRESS,
	// which no other live process can hold, so a restart reclaims its own leases at once.
	ln, err := net.Listen("tcp", cfg.Address)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Address, err)
	}
	defer ln.Close()
	engineCfg.Address = ln.Addr().String()
	if !cfg.EnqueueInProgressOperations {
		log.Info("APP_ENQUEUE_IN_PROGRESS_OPERATIONS=false: operations in progress before this start are left to other replicas")
	}
	eng, err := engine.New(store, p.EngineConfig(engineCfg, start), log, engine.WithRegisterer(reg))
	if err != nil {
		return err
	}
	if err := p.Register(eng); err != nil {
		return err
	}

	schema, err := driver.LatestSchemaVersion(dbCfg)
	if err != nil {
		return err
	}
	httpMetrics, err := observe.NewHTTPMetrics(reg)
	if err != nil {
		return err
	}
	// A server span and the request metrics per request, continuing the broker's traceparent.
	srv := &http.Server{Addr: cfg.Address, Handler: p.Server(health.New(store, schema, reg), httpMetrics), ReadHeaderTimeout: 10 * time.Second}

	runCtx, stopEngine := context.WithCancel(ctx)
	defer stopEngine()
	engineDone := make(chan error, 1)
	go func() { engineDone <- eng.Run(runCtx) }()
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()
	log.WithFields(logrus.Fields{"address": cfg.Address, "api": cfg.APIEndpoint, "backends": p.Backends.Names()}).Info("provisioner listening")

	select {
	case err := <-serveDone:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving %s: %w", cfg.Address, err)
		}
	case <-ctx.Done():
	}
	stopEngine()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	return <-engineDone
}
