// Package runtimeclient reaches into a runtime's cluster for the provisioner's stages:
// operator bindings, the Kyma resource, the Runtime Agent's configuration Secret and the
// CompassConnection the agent reports through.
package runtimeclient

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/module/modulespec"
	"k8s.io/client-go/tools/clientcmd"
)

// Kyma states as the Kyma resource reports them.
const (
	KymaReady      = "Ready"
	KymaProcessing = "Processing"
	KymaError      = "Error"
)

// CompassConnection states; the agent is connected once Synchronized.
const (
	ConnectionSynchronized = "Synchronized"
	ConnectionFailed       = "ConnectionFailed"
)

// KymaSpec is the Kyma installation requested for a runtime.
type KymaSpec struct {
	Version string
	Profile string
	// Modules are the components, installed as Kyma modules (spec.modules).
	Modules []modulespec.ModuleSpec
}

// AgentConfig is what the Runtime Agent needs to connect (Secret compass-agent-configuration).
type AgentConfig struct {
	ConnectorURL string
	RuntimeID    string
	Tenant       string
	Token        string
}

// Runtime is one runtime's cluster. The *Since arguments say when the request was first
// made; real clusters ignore them, the simulator answers from them without keeping state.
type Runtime interface {
	ApplyOperatorBindings(ctx context.Context, administrators []string) error
	ApplyKyma(ctx context.Context, spec KymaSpec) error
	// KymaState returns the Kyma resource's state and message ("" when it does not exist).
	KymaState(ctx context.Context, spec KymaSpec, appliedSince time.Time) (string, string, error)
	DeleteKyma(ctx context.Context) error
	WriteAgentConfig(ctx context.Context, cfg AgentConfig) error
	// ConnectionState returns the CompassConnection's state ("" when it does not exist).
	ConnectionState(ctx context.Context, configuredSince time.Time) (string, error)
}

// Factory opens a runtime from its kubeconfig.
type Factory interface {
	ForKubeconfig(kubeconfig string) (Runtime, error)
}

// ConfinedFactory opens runtimes that are a namespace of a shared host (the kubernetes backend):
// their kubeconfig is confined to that namespace, which is also their Kyma namespace.
type ConfinedFactory interface {
	ForNamespace(kubeconfig, namespace string) (Runtime, error)
	// InstallsModules: the provisioner installs requested modules itself (a module catalog is
	// configured); only then is Kyma applied to such runtimes, as nothing else would install it.
	InstallsModules() bool
}

// InstallsModulesInNamespaces says whether f opens confined runtimes and installs their modules.
func InstallsModulesInNamespaces(f Factory) bool {
	c, ok := f.(ConfinedFactory)
	return ok && c.InstallsModules()
}

// SimulatedScheme marks kubeconfigs of simulated runtimes.
const SimulatedScheme = "simulated://"

// Clusters opens simulated runtimes for simulated kubeconfigs and real clusters otherwise.
type Clusters struct {
	// Simulated: durations set here override what simulated kubeconfigs carry (tests).
	Simulated Simulated
	// Modules, when set, installs the modules real runtimes request (nil: they are only
	// recorded in the Kyma resource).
	Modules *Modules
}

func (c Clusters) ForKubeconfig(kubeconfig string) (Runtime, error) {
	return c.open(kubeconfig, "")
}

// ForNamespace opens a runtime confined to namespace (simulated runtimes ignore it).
func (c Clusters) ForNamespace(kubeconfig, namespace string) (Runtime, error) {
	if namespace == "" {
		return nil, fmt.Errorf("opening a confined runtime: no namespace")
	}
	return c.open(kubeconfig, namespace)
}

// InstallsModules: a module catalog is configured.
func (c Clusters) InstallsModules() bool { return c.Modules != nil }

func (c Clusters) open(kubeconfig, namespace string) (Runtime, error) {
	if server, ok := simulatedServer(kubeconfig); ok {
		return simulatedFor(c.Simulated, server)
	}
	cfg, err := clientcmd.Load([]byte(kubeconfig))
	if err != nil {
		return nil, fmt.Errorf("reading the runtime's kubeconfig: %w", err)
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return nil, fmt.Errorf("reading the runtime's kubeconfig: current context %q not found", cfg.CurrentContext)
	}
	cluster, ok := cfg.Clusters[ctx.Cluster]
	if !ok {
		return nil, fmt.Errorf("reading the runtime's kubeconfig: cluster %q not found", ctx.Cluster)
	}
	if strings.HasPrefix(cluster.Server, SimulatedScheme) {
		return simulatedFor(c.Simulated, cluster.Server)
	}
	if namespace != "" {
		return NewConfinedKube([]byte(kubeconfig), namespace, c.Modules)
	}
	return NewKubeWithModules([]byte(kubeconfig), c.Modules)
}
