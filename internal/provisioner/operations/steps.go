package operations

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/module/modulespec"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/compass"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Op is a provisioner operation as its steps see it.
type Op = engine.Operation[Data]

// Backends finds a runtime's infrastructure backend by name.
type Backends interface {
	Get(name string) (infrastructure.Backend, error)
}

// Deps is what the steps use.
type Deps struct {
	Runtimes storage.Runtimes
	Backends Backends
	Clusters runtimeclient.Factory
	Director compass.Client
	// ConnectorURL is given to the agent when the Director's token carries none.
	ConnectorURL string
	// PollInterval is how long a step waits before asking a backend or cluster again.
	PollInterval time.Duration
	// DirectorRetryTime bounds how long a provisioning step retries a Director that fails
	// temporarily before the operation fails naming it (10 minutes when 0); DirectorCleanupTime
	// how long deprovisioning tries to unregister the runtime before it goes on without (5 minutes
	// when 0).
	DirectorRetryTime   time.Duration
	DirectorCleanupTime time.Duration
}

// Default windows of a failing Director.
const (
	defaultDirectorRetryTime   = 10 * time.Minute
	defaultDirectorCleanupTime = 5 * time.Minute
)

// directorFailed is a step's answer to a Director error: a temporary one (no answer, 429, 5xx,
// Compass's InternalError) is tried again after the poll interval while the step is within its
// retry window, a permanent one (4xx, invalid data, an unknown runtime, a request that cannot be
// built) fails the operation at once. Either way the Director and its answer are named.
func (d Deps) directorFailed(op Op, what string, err error) (Op, time.Duration, error) {
	msg := fmt.Sprintf("Director: %s: %v", what, err)
	if !clientkit.Retryable(err) {
		return op, 0, fmt.Errorf("%s: step %s failed", msg, op.CurrentStep())
	}
	window := d.DirectorRetryTime
	if window <= 0 {
		window = defaultDirectorRetryTime
	}
	return op.RetryOperation(msg, d.PollInterval, window)
}

// KubeconfigKey is where a runtime's kubeconfig is kept in its encrypted secrets.
const KubeconfigKey = storage.KubeconfigSecret

// waitFor asks to run the step again after the poll interval, recording why.
func (d Deps) waitFor(op Op, reason string) (Op, time.Duration, error) {
	op.LastError = reason
	return op, d.PollInterval, nil
}

// requested remembers the first time a request of this kind was made and returns it.
func requested(op *Op, kind string) time.Time {
	if t, ok := op.Data.RequestedAt[kind]; ok {
		return t
	}
	if op.Data.RequestedAt == nil {
		op.Data.RequestedAt = map[string]time.Time{}
	}
	t := op.Now().UTC()
	op.Data.RequestedAt[kind] = t
	return t
}

// spec is the backend's view of the runtime for a request of this kind.
func spec(op *Op, kind string) infrastructure.Spec {
	sp := RuntimeSpec(op.Data.RuntimeID, op.Data.Tenant, op.Data.Config)
	sp.OperationID, sp.Request, sp.RequestedAt = op.ID, infrastructure.Request(kind), requested(op, kind)
	return sp
}

// RuntimeSpec is the backend's view of a runtime outside of an operation: its slots are the
// requested autoScalerMin (at least 1), its version the requested Kyma version.
func RuntimeSpec(runtimeID, tenant string, cfg RuntimeConfig) infrastructure.Spec {
	sp := infrastructure.Spec{
		RuntimeID: runtimeID, Name: cfg.Cluster.Name, Tenant: tenant, SubAccountID: cfg.SubAccountID,
		Cluster: cfg.Cluster, Slots: max(cfg.Cluster.AutoScalerMin, 1),
	}
	if cfg.Kyma != nil {
		sp.Version = cfg.Kyma.Version
	}
	return sp
}

func (d Deps) backend(op Op) (infrastructure.Backend, error) {
	b, err := d.Backends.Get(op.Data.Backend)
	if err != nil {
		return nil, fmt.Errorf("finding backend %q of runtime %s: %w", op.Data.Backend, op.Data.RuntimeID, err)
	}
	return b, nil
}

// kubeconfigMemo keeps the runtime's kubeconfig for the later steps of a run (engine.Memo):
// Wait_For_Cluster_Creation, which stores it, and the steps that open the cluster after it
// would otherwise each read the runtime again (four reads of one row a provisioning).
const kubeconfigMemo = "kubeconfig"

// cluster opens the runtime's cluster from its stored kubeconfig.
func (d Deps) cluster(ctx context.Context, op Op) (runtimeclient.Runtime, error) {
	kc, err := engine.Memo(op, kubeconfigMemo, func() (string, error) {
		rt, err := d.Runtimes.GetRuntime(ctx, op.Data.RuntimeID)
		if err != nil {
			return "", err
		}
		if rt.Secrets[KubeconfigKey] == "" {
			return "", fmt.Errorf("runtime %s has no kubeconfig yet", rt.ID)
		}
		engine.Remember(op, namespaceMemo, allocationNamespace(rt)) // from the same read
		return rt.Secrets[KubeconfigKey], nil
	})
	if err != nil {
		return nil, err
	}
	b, err := d.backend(op)
	if err != nil {
		return nil, err
	}
	kc, renewed, err := FreshKubeconfig(ctx, b, d.Runtimes, RuntimeSpec(op.Data.RuntimeID, op.Data.Tenant, op.Data.Config), kc, op.Now())
	if err != nil {
		return nil, err
	}
	if renewed {
		engine.Remember(op, kubeconfigMemo, kc)
	}
	ns, err := engine.Memo(op, namespaceMemo, func() (string, error) { return d.confinedNamespace(ctx, op) })
	if err != nil {
		return nil, err
	}
	return d.open(kc, ns)
}

// namespaceMemo keeps the runtime's own namespace (confinedNamespace) for the run's later steps.
const namespaceMemo = "confined-namespace"

// confinedNamespace is the namespace of a runtime that is a namespace of a shared host (its
// allocation names it), "" for a cluster of its own.
func (d Deps) confinedNamespace(ctx context.Context, op Op) (string, error) {
	if op.Data.Namespace != "" {
		return op.Data.Namespace, nil
	}
	rt, err := d.Runtimes.GetRuntime(ctx, op.Data.RuntimeID)
	if err != nil {
		return "", err
	}
	return allocationNamespace(rt), nil
}

func allocationNamespace(rt storage.Runtime) string {
	if len(rt.Allocation) == 0 {
		return ""
	}
	var a infrastructure.Allocation
	if err := json.Unmarshal(rt.Allocation, &a); err != nil {
		return "" // an allocation the steps cannot read: the runtime is opened as before
	}
	return a.Namespace
}

// open opens the runtime, confined to ns when it has one and the factory can.
func (d Deps) open(kc, ns string) (runtimeclient.Runtime, error) {
	if cf, ok := d.Clusters.(runtimeclient.ConfinedFactory); ok && ns != "" {
		return cf.ForNamespace(kc, ns)
	}
	return d.Clusters.ForKubeconfig(kc)
}

// updateRuntime applies change to the stored runtime (re-reading once on a version conflict).
func (d Deps) updateRuntime(ctx context.Context, id string, change func(*storage.Runtime) error) error {
	_, err := storage.ModifyRuntime(ctx, d.Runtimes, id, change)
	return err
}

func kymaSpec(k *Kyma) runtimeclient.KymaSpec {
	s := runtimeclient.KymaSpec{Version: k.Version, Profile: k.Profile}
	for _, c := range k.Components {
		m := modulespec.ModuleSpec{Name: c.Name}
		for _, e := range c.Configuration {
			switch e.Key {
			case modulespec.ConfigKeyChannel:
				m.Channel = e.Value
			case modulespec.ConfigKeyCustomResourcePolicy:
				m.CustomResourcePolicy = e.Value
			}
		}
		s.Modules = append(s.Modules, m)
	}
	return s
}
