// Package provisioner assembles the embedded Runtime Provisioner: its service, its processes
// for the step engine, its infrastructure backends and its GraphQL handler. cmd/provisioner
// runs it alone; the broker embeds it behind the same client interface.
package provisioner

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/api"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/compass"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/config"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/backends"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/operations"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/service"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// Options configure the provisioner; zero values take the defaults in brackets.
type Options struct {
	Config   config.Config
	Backends infrastructure.Config
	// Clusters opens runtimes' clusters [real clusters, simulated ones for simulated kubeconfigs,
	// with the durations the simulated backend's spec put in them].
	Clusters runtimeclient.Factory
	// Director [a local stand-in that keeps no state].
	Director compass.Client
	// PollInterval between checks of a backend or cluster [2s].
	PollInterval time.Duration
	// DirectorRetryTime and DirectorCleanupTime are the windows of a failing Director in
	// provisioning and deprovisioning [10m, 5m]: the broker passes APP_EXTERNAL_RETRY_TIME and
	// APP_EXTERNAL_CLEANUP_RETRY_TIME, as for its own steps.
	DirectorRetryTime, DirectorCleanupTime time.Duration
	// Types of backends the set may use [all: gardener, kubernetes, static, simulated].
	Types infrastructure.Types
	// Environ is the process environment, to tell variables that are set from defaults and to
	// reject a provisioner set under a name that would be ignored [os.Environ()].
	Environ []string
	Log     logrus.FieldLogger
}

// Provisioner is the assembled provisioner.
type Provisioner struct {
	Service     *service.Service
	Definitions []engine.Definition
	Backends    *infrastructure.Set
	cfg         config.Config
	log         logrus.FieldLogger
}

// openedClusters bounds the runtimes' clusters kept open by their kubeconfig (runtimeclient.Cached):
// those of the operations in flight.
const openedClusters = 1024

// New assembles the provisioner on store.
func New(ctx context.Context, store storage.Store, o Options) (*Provisioner, error) {
	if o.Log == nil {
		o.Log = logrus.New()
	}
	if o.Types == nil {
		o.Types = backends.Types()
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 2 * time.Second
	}
	if o.Clusters == nil {
		modules, err := runtimeclient.LoadModules(runtimeclient.ModuleSettings{
			CatalogDir: o.Config.ModuleCatalogDir, PublicKeysFile: o.Config.ModulePublicKeysFile,
			PlainHTTPRegistries: o.Config.ModulePlainHTTPRegistries, RegistryCredentialsFile: o.Config.ModuleRegistryCredentialsFile,
		}, o.Log)
		if err != nil {
			return nil, fmt.Errorf("loading the module catalog (APP_MODULE_CATALOG_DIR): %w", err)
		}
		o.Clusters = runtimeclient.Cached(runtimeclient.Clusters{Modules: modules}, openedClusters)
	}
	if o.Director == nil {
		o.Director = compass.Local{ConnectorURL: o.Config.ConnectorURL}
	}
	if o.Environ == nil {
		o.Environ = os.Environ()
	}
	if err := infrastructure.CheckEnvironment(o.Environ); err != nil {
		return nil, err
	}
	backends, err := GardenerVariables(o.Backends, o.Config, o.Environ)
	if err != nil {
		return nil, err
	}
	set, err := infrastructure.NewSet(ctx, backends, infrastructure.Deps{Static: store.StaticAllocations(), Log: o.Log}, o.Types)
	if err != nil {
		return nil, fmt.Errorf("loading the provisioner set: %w", err)
	}
	deps := operations.Deps{
		// Register_Runtime's Compass ID rides on the operation's save (engine.DeferringRuntimes).
		Runtimes: engine.DeferringRuntimes{Runtimes: store.Runtimes()}, Backends: set, Clusters: o.Clusters, Director: o.Director,
		ConnectorURL: o.Config.ConnectorURL, PollInterval: o.PollInterval,
		DirectorRetryTime: o.DirectorRetryTime, DirectorCleanupTime: o.DirectorCleanupTime,
	}
	defs, err := operations.Definitions(deps, o.Config)
	if err != nil {
		return nil, err
	}
	log := o.Log.WithField("component", "provisioner")
	svc := service.New(store, set, o.Config.OperationTimeout, log)
	if r, ok := o.Director.(compass.ConditionReader); ok {
		// runtimeConnectionStatus follows what the Runtime Agents report in the Director.
		svc.ReadConditionsFrom(r)
	}
	return &Provisioner{Service: svc, Definitions: defs, Backends: set, cfg: o.Config, log: log}, nil
}

// Register adds the provisioner's processes to an engine.
func (p *Provisioner) Register(e *engine.Engine) error {
	for _, d := range p.Definitions {
		if err := e.Register(d); err != nil {
			return err
		}
	}
	return nil
}

// Handler serves the GraphQL API and playground at the configured endpoints.
func (p *Provisioner) Handler() http.Handler {
	return api.NewHandler(p.Service, api.Config{APIEndpoint: p.cfg.APIEndpoint, PlaygroundEndpoint: p.cfg.PlaygroundAPIEndpoint}, p.log)
}
