// Package externals builds the clients of the broker's external systems from configuration
// (APP_* variables): configuration in, clients out. The stand-ins point a configuration at
// themselves (standins.PointAt); the processes' limits are assembled by internal/app.
package externals

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/avs"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/director"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/edp"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/eventhubs"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/ias"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/reconciler"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/servicemanager"
	"github.com/kyma-project/kyma-environment-broker/internal/hyperscaler"
	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner"
	provconfig "github.com/kyma-project/kyma-environment-broker/internal/provisioner/config"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/resources"
	"github.com/sirupsen/logrus"
)

// Settings are the broker's own settings about its external systems.
type Settings struct {
	// SandboxEnabled embeds the sandbox and points every system at it (the quickstart default);
	// configured URLs and credentials are then ignored.
	SandboxEnabled bool   `envconfig:"SANDBOX_ENABLED" default:"true"`
	SandboxAddress string `envconfig:"SANDBOX_ADDRESS" default:"127.0.0.1:8090"`
	// SandboxTLSAddress is the sandbox's TLS listener, serving the Connector and the runtimes'
	// mutual-TLS endpoints with a certificate of the sandbox CA.
	SandboxTLSAddress string `envconfig:"SANDBOX_TLS_ADDRESS" default:"127.0.0.1:8443"`
	// The credentials of the sandbox's /_sandbox/ endpoints (APP_SANDBOX_ADMIN_*), required
	// when it listens beyond loopback.
	sandbox.AdminConfig
	// Disabled systems' steps are skipped. IAS and EDP have theirs in their own configuration.
	AVSDisabled            bool  `envconfig:"AVS_DISABLED"`
	ServiceManagerDisabled bool  `envconfig:"SERVICE_MANAGER_DISABLED"`
	EventHubsDisabled      bool  `envconfig:"AZURE_EVENT_HUBS_DISABLED"`
	ReconcilerDisabled     bool  `envconfig:"RECONCILER_DISABLED"`
	DirectorDisabled       bool  `envconfig:"DIRECTOR_DISABLED"`
	AVSGroupID             int64 `envconfig:"AVS_GROUP_ID"`
	AVSRuntimeIDTagClassID int64 `envconfig:"AVS_RUNTIME_ID_TAG_CLASS_ID" default:"1"`
	AVSInstanceTagClassID  int64 `envconfig:"AVS_INSTANCE_ID_TAG_CLASS_ID" default:"2"`
	AVSShootTagClassID     int64 `envconfig:"AVS_SHOOT_NAME_TAG_CLASS_ID" default:"3"`
	// OverridesFile replaces the shipped default overrides (resources/overrides.yaml).
	OverridesFile string `envconfig:"OVERRIDES_FILE"`
	// RetryTime bounds a provisioning or upgrade step's retries of a failing system,
	// CleanupRetryTime a deprovisioning step's (then it gives up without failing). CallTimeout is
	// the budget of one client call (its few attempts, see clientkit.Calls, which every client reads
	// from the same variable) and bounds one run of a step calling a system: a failing system
	// costs a worker at most that long, then the step waits durably for its next try.
	RetryTime        time.Duration `envconfig:"EXTERNAL_RETRY_TIME" default:"10m"`
	CleanupRetryTime time.Duration `envconfig:"EXTERNAL_CLEANUP_RETRY_TIME" default:"5m"`
	CallTimeout      time.Duration `envconfig:"EXTERNAL_CALL_TIMEOUT" default:"15s"`
	// ReconcileTimeout bounds the wait for the reconciler to install Kyma.
	ReconcileTimeout time.Duration `envconfig:"RECONCILE_TIMEOUT" default:"2h"`
}

// Config is every external system's configuration.
type Config struct {
	Settings       Settings
	AVS            avs.Config
	EDP            edp.Config
	IAS            ias.Config
	ServiceManager servicemanager.Config
	Azure          eventhubs.Config
	Reconciler     reconciler.Config
	Director       director.Config
	// Log receives the account pool's line saying which pool it is; nil discards it.
	Log logrus.FieldLogger
	// AccountPool is the hyperscaler account pool (APP_HYPERSCALER_ACCOUNT_POOL*).
	AccountPool hyperscaler.Config
	// Backends is the provisioner set as the provisioner reads it (APP_GARDENER_* applied):
	// the account pool lives on its gardener backend's cluster.
	Backends infrastructure.Config
}

// Load reads Config from APP_* variables.
func Load() (Config, error) {
	var c Config
	var prov provconfig.Config
	for _, part := range []any{&c.Settings, &c.AVS, &c.EDP, &c.IAS, &c.ServiceManager, &c.Azure, &c.Reconciler, &c.Director, &c.AccountPool, &c.Backends, &prov} {
		if err := envconfig.Process("APP", part); err != nil {
			return c, fmt.Errorf("reading external systems' configuration: %w", err)
		}
	}
	backends, err := provisioner.GardenerVariables(c.Backends, prov, os.Environ())
	if err != nil {
		return c, fmt.Errorf("reading the hyperscaler account pool's Gardener: %w", err)
	}
	c.Backends = backends
	return c, nil
}

// DisableAll turns every system off: their steps are skipped.
func (c *Config) DisableAll() {
	s := &c.Settings
	s.AVSDisabled, s.ServiceManagerDisabled, s.EventHubsDisabled, s.ReconcilerDisabled, s.DirectorDisabled = true, true, true, true, true
	c.IAS.Disabled, c.EDP.Disabled = true, true
}

// shared are every client's shared configuration.
func (c *Config) shared() []*clientkit.Config {
	return []*clientkit.Config{&c.AVS.Config, &c.EDP.Config, &c.IAS.Config, &c.ServiceManager.Config,
		&c.Azure.Config, &c.Reconciler.Config, &c.Director.Config}
}

// SetTransport sends every client's requests through t (the embedded sandbox's in-process
// transport).
func (c *Config) SetTransport(t http.RoundTripper) {
	for _, s := range c.shared() {
		s.Transport = t
	}
}

// clientCalls are every client's backoff bounds and call policy.
func (c *Config) clientCalls() []struct {
	initial, max *time.Duration
	calls        *clientkit.Calls
} {
	return []struct {
		initial, max *time.Duration
		calls        *clientkit.Calls
	}{
		{&c.AVS.RetryInitialBackoff, &c.AVS.RetryMaxBackoff, &c.AVS.Calls}, {&c.EDP.RetryInitialBackoff, &c.EDP.RetryMaxBackoff, &c.EDP.Calls},
		{&c.IAS.RetryInitialBackoff, &c.IAS.RetryMaxBackoff, &c.IAS.Calls},
		{&c.ServiceManager.RetryInitialBackoff, &c.ServiceManager.RetryMaxBackoff, &c.ServiceManager.Calls},
		{&c.Azure.RetryInitialBackoff, &c.Azure.RetryMaxBackoff, &c.Azure.Calls},
		{&c.Reconciler.RetryInitialBackoff, &c.Reconciler.RetryMaxBackoff, &c.Reconciler.Calls},
		{&c.Director.RetryInitialBackoff, &c.Director.RetryMaxBackoff, &c.Director.Calls},
	}
}

// SetRetryBackoff sets every client's backoff between retries; a zero bound is left as it is.
func (c *Config) SetRetryBackoff(initial, max time.Duration) {
	for _, b := range c.clientCalls() {
		if initial > 0 {
			*b.initial = initial
		}
		if max > 0 {
			*b.max = max
		}
	}
}

// SetCalls sets every client's call policy (attempts, budget, breaker).
func (c *Config) SetCalls(calls clientkit.Calls) {
	for _, s := range c.shared() {
		s.Calls = calls
	}
}

// Instrument makes every client count and time its requests in m (keb_external_* metrics).
func (c *Config) Instrument(m *clientkit.CallMetrics) {
	for _, s := range c.shared() {
		s.Metrics = m
	}
}

// Built are the clients the broker runs with.
type Built struct {
	Systems   systems.Systems
	Overrides overrides.Defaults
	// Director is the real Director client for the embedded provisioner; nil when disabled.
	Director *director.Client
}

// Build creates the clients. A system neither configured nor disabled is an error naming the
// variables to set, so a misconfigured broker does not start rather than fail every operation.
func (c Config) Build() (Built, error) {
	s := c.Settings
	var errs []error
	fail := func(system, disable string, err error) {
		errs = append(errs, fmt.Errorf("%s (or set %s=true): %w", system, disable, err))
	}
	var b Built
	b.Systems.RetryTime, b.Systems.CleanupRetryTime = s.RetryTime, s.CleanupRetryTime
	if !s.AVSDisabled {
		if cl, err := avs.New(c.AVS); err != nil {
			fail("AVS", "APP_AVS_DISABLED", err)
		} else {
			b.Systems.AVS = cl
			b.Systems.AVSSettings = systems.AVSSettings{
				ParentID: c.AVS.ParentID, InternalTesterAccessID: c.AVS.InternalTesterAccessID, ExternalTesterAccessID: c.AVS.ExternalTesterAccessID,
				GroupID: s.AVSGroupID, RuntimeIDTagClassID: s.AVSRuntimeIDTagClassID, InstanceIDTagClassID: s.AVSInstanceTagClassID, ShootNameTagClassID: s.AVSShootTagClassID,
			}
		}
	}
	if !c.EDP.Disabled {
		if cl, err := edp.New(c.EDP); err != nil {
			fail("EDP", "APP_EDP_DISABLED", err)
		} else {
			b.Systems.EDP, b.Systems.EDPEnvironment = cl, c.EDP.Environment
		}
	}
	if !c.IAS.Disabled {
		if cl, err := ias.New(c.IAS); err != nil {
			fail("IAS", "APP_IAS_DISABLED", err)
		} else {
			b.Systems.IAS = cl
		}
	}
	if !s.ServiceManagerDisabled {
		if cl, err := servicemanager.New(c.ServiceManager); err != nil {
			fail("Service Manager", "APP_SERVICE_MANAGER_DISABLED", err)
		} else if _, ok := cl.DefaultCredentials(); !ok {
			fail("Service Manager", "APP_SERVICE_MANAGER_DISABLED", errors.New("APP_SERVICE_MANAGER_URL, _TOKEN_URL, _CLIENT_ID and _CLIENT_SECRET are required"))
		} else {
			b.Systems.ServiceManager = cl
		}
	}
	if !s.EventHubsDisabled {
		if cl, err := eventhubs.New(c.Azure); err != nil {
			fail("Azure Event Hubs", "APP_AZURE_EVENT_HUBS_DISABLED", err)
		} else {
			b.Systems.EventHubs = cl
		}
	}
	if !s.ReconcilerDisabled {
		if cl, err := reconciler.New(c.Reconciler); err != nil {
			fail("Reconciler", "APP_RECONCILER_DISABLED", err)
		} else {
			b.Systems.Reconciler = cl
		}
	}
	if !s.DirectorDisabled {
		if cl, err := director.New(c.Director); err != nil {
			fail("Director", "APP_DIRECTOR_DISABLED", err)
		} else {
			b.Systems.Director, b.Director = cl, cl
		}
	}
	pool, err := c.AccountPool.Build(c.Backends, c.Log)
	if err != nil {
		errs = append(errs, err)
	}
	b.Systems.AccountPool, b.Systems.AccountRules = pool, c.AccountPool.Rules()
	if b.Overrides, err = overrides.LoadDefaults(s.OverridesFile, resources.Overrides()); err != nil {
		errs = append(errs, fmt.Errorf("APP_OVERRIDES_FILE: %w", err))
	}
	if len(errs) > 0 {
		return Built{}, fmt.Errorf("configuring external systems: %w", errors.Join(errs...))
	}
	return b, nil
}
