// Package service is the Runtime Provisioner's API behaviour behind both its GraphQL handler
// and the in-process client: validation, tenant scoping, one operation per runtime, and the
// mapping of engine operations to OperationStatus. It never calls a backend or an external
// system itself, except to issue and revoke a runtime's credentials, which the OSB binding
// flow needs synchronously: it stores runtimes and operations, and the engine's steps do the
// work.
package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/operations"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// BackendLabel in runtimeInput.labels selects the runtime's infrastructure backend by name;
// without it the set's default is used.
const BackendLabel = "kyma-project.io/provisioner"

// SubAccountLabel in runtimeInput.labels is the runtime's subaccount (the real provisioner's
// clients send it in the sub-account header instead, which the API turns into this label).
const SubAccountLabel = "subaccount"

// IdempotencyLabel in runtimeInput.labels makes provisionRuntime idempotent: the runtime ID
// is derived from the tenant and the key, and a repeat returns the first provisioning.
const IdempotencyLabel = "kyma-project.io/idempotency-key"

// Backends is the named set of infrastructure backends.
type Backends interface {
	Default() string
	Names() []string
	operations.Backends
}

// Service implements client.Client.
type Service struct {
	store    storage.Store
	backends Backends
	timeout  time.Duration
	now      func() time.Time
	log      logrus.FieldLogger
	// conditions are the agents' reports in the Director (nil: the operations alone say).
	conditions *conditionCache
}

var _ client.Client = (*Service)(nil)

// New returns the service; operationTimeout is each operation's deadline.
func New(store storage.Store, backends Backends, operationTimeout time.Duration, log logrus.FieldLogger) *Service {
	return &Service{store: store, backends: backends, timeout: operationTimeout, now: time.Now, log: log}
}

func (s *Service) ProvisionRuntime(ctx context.Context, tenant string, in gqlschema.ProvisionRuntimeInput) (*gqlschema.OperationStatus, error) {
	if tenant == "" {
		return nil, apperr.BadRequest("tenant", "the tenant header is required")
	}
	if err := validateProvision(in); err != nil {
		return nil, err
	}
	backend, err := s.backendFor(in.RuntimeInput.Labels)
	if err != nil {
		return nil, err
	}
	id := uuid.NewString()
	key, hasKey := in.RuntimeInput.Labels[IdempotencyLabel].(string)
	if hasKey && key != "" {
		id = uuid.NewSHA1(uuid.NameSpaceURL, []byte("keb-runtime:"+tenant+"/"+key)).String()
	}
	g := *in.ClusterConfig.GardenerConfig
	name := deref(g.Name)
	if name == "" {
		name = "c-" + id[:7] // Gardener shoot names are short
		g.Name = &name
	}
	g.ProviderSpecificConfig = withProviderDefaults(g.ProviderSpecificConfig)
	cluster, err := clusterConfig(g, name)
	if err != nil {
		return nil, err
	}
	rawGardener, err := json.Marshal(g)
	if err != nil {
		return nil, fmt.Errorf("encoding cluster configuration: %w", err)
	}
	kyma, secrets := kymaFromInput(in.KymaConfig)
	cfg := operations.RuntimeConfig{
		Description: deref(in.RuntimeInput.Description), Labels: in.RuntimeInput.Labels, Cluster: cluster, Gardener: rawGardener,
		Administrators: in.ClusterConfig.Administrators, Kyma: kyma,
	}
	if sub, ok := in.RuntimeInput.Labels[SubAccountLabel].(string); ok {
		cfg.SubAccountID = sub
	}
	rawCfg, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding runtime configuration: %w", err)
	}
	data := operations.Data{RuntimeID: id, Tenant: tenant, Backend: backend, Config: cfg}
	op, err := engine.NewOperation(operations.TypeProvision, id, data, s.timeout, s.now())
	if err != nil {
		return nil, err
	}
	rt := storage.Runtime{ID: id, Tenant: tenant, Name: in.RuntimeInput.Name, Backend: backend, Config: rawCfg, Secrets: secrets}
	rt, op, err = s.store.Runtimes().InsertRuntimeWithOperation(ctx, rt, op)
	if errors.Is(err, storage.ErrAlreadyExists) && hasKey {
		return s.existingProvisioning(ctx, tenant, id)
	}
	if err != nil {
		return nil, fmt.Errorf("storing runtime %s: %w", id, err)
	}
	s.log.WithFields(logrus.Fields{"runtime_id": id, "operation_id": op.ID, "tenant": tenant, "backend": backend}).Info("provisioning runtime")
	return operationStatus(op, rt)
}

// existingProvisioning answers a repeated idempotent provisionRuntime.
func (s *Service) existingProvisioning(ctx context.Context, tenant, runtimeID string) (*gqlschema.OperationStatus, error) {
	rt, err := s.runtime(ctx, tenant, runtimeID, true)
	if err != nil {
		return nil, err
	}
	ops, err := s.store.Operations().ListOperations(ctx, storage.OperationFilter{
		InstanceIDs: []string{runtimeID}, Types: []string{operations.TypeProvision}, Paging: storage.Paging{PageSize: 1},
	})
	if err != nil || len(ops.Items) == 0 {
		return nil, fmt.Errorf("finding the provisioning of runtime %s: %v", runtimeID, err)
	}
	return operationStatus(ops.Items[0], rt)
}

func (s *Service) backendFor(labels map[string]any) (string, error) {
	name := s.backends.Default()
	if v, ok := labels[BackendLabel]; ok {
		str, isString := v.(string)
		if !isString || str == "" {
			return "", apperr.BadRequest("config.runtimeInput.labels."+BackendLabel, "must be a backend name")
		}
		name = str
	}
	if _, err := s.backends.Get(name); err != nil {
		return "", apperr.BadRequest("config.runtimeInput.labels."+BackendLabel, "unknown provisioner %q (available: %v)", name, s.backends.Names())
	}
	return name, nil
}

// runtime returns the tenant's runtime; another tenant's or a deleted one is not found.
func (s *Service) runtime(ctx context.Context, tenant, id string, includeDeleted bool) (storage.Runtime, error) {
	rt, err := s.store.Runtimes().GetRuntime(ctx, id)
	if errors.Is(err, storage.ErrNotFound) || (err == nil && (rt.Tenant != tenant || (rt.Deleted && !includeDeleted))) {
		return storage.Runtime{}, apperr.NotFound("runtime %s not found", id)
	}
	if err != nil {
		return storage.Runtime{}, fmt.Errorf("reading runtime %s: %w", id, err)
	}
	return rt, nil
}

// start begins an operation of opType on the tenant's runtime with the runtime's current
// configuration, changed by change when given.
func (s *Service) start(ctx context.Context, tenant, runtimeID, opType string, change func(*operations.RuntimeConfig) error) (storage.Operation, storage.Runtime, error) {
	rt, err := s.runtime(ctx, tenant, runtimeID, false)
	if err != nil {
		return storage.Operation{}, storage.Runtime{}, err
	}
	cfg, err := operations.DecodeRuntimeConfig(rt)
	if err != nil {
		return storage.Operation{}, storage.Runtime{}, err
	}
	if change != nil {
		if err := change(&cfg); err != nil {
			return storage.Operation{}, storage.Runtime{}, err
		}
	}
	data := operations.Data{RuntimeID: rt.ID, Tenant: rt.Tenant, Backend: rt.Backend, Config: cfg, CompassRuntimeID: rt.CompassRuntimeID}
	op, err := engine.NewOperation(opType, rt.ID, data, s.timeout, s.now())
	if err != nil {
		return storage.Operation{}, storage.Runtime{}, err
	}
	op, err = s.store.Runtimes().StartRuntimeOperation(ctx, op)
	switch {
	case errors.Is(err, storage.ErrOperationInProgress):
		return storage.Operation{}, storage.Runtime{}, apperr.Conflict("runtime %s: %v", runtimeID, err)
	case errors.Is(err, storage.ErrNotFound):
		return storage.Operation{}, storage.Runtime{}, apperr.NotFound("runtime %s not found", runtimeID)
	case err != nil:
		return storage.Operation{}, storage.Runtime{}, fmt.Errorf("starting %s on runtime %s: %w", opType, runtimeID, err)
	}
	s.log.WithFields(logrus.Fields{"runtime_id": rt.ID, "operation_id": op.ID, "operation_type": opType}).Info("operation started")
	return op, rt, nil
}

func (s *Service) DeprovisionRuntime(ctx context.Context, tenant, runtimeID string) (string, error) {
	op, _, err := s.start(ctx, tenant, runtimeID, operations.TypeDeprovision, nil)
	if err != nil {
		return "", err
	}
	return op.ID, nil
}

func (s *Service) UpgradeRuntime(ctx context.Context, tenant, runtimeID string, in gqlschema.UpgradeRuntimeInput) (*gqlschema.OperationStatus, error) {
	if in.KymaConfig == nil {
		return nil, apperr.BadRequest("config.kymaConfig", "is required")
	}
	if err := validateKyma("config.kymaConfig", in.KymaConfig); err != nil {
		return nil, err
	}
	kyma, secrets := kymaFromInput(in.KymaConfig)
	if len(secrets) > 0 {
		// A rejected upgrade must not change the runtime's secrets: check what start rejects first.
		if err := s.checkKymaUpgrade(ctx, tenant, runtimeID); err != nil {
			return nil, err
		}
		if err := s.storeSecrets(ctx, tenant, runtimeID, secrets); err != nil {
			return nil, err
		}
	}
	op, rt, err := s.start(ctx, tenant, runtimeID, operations.TypeUpgradeRuntime, func(c *operations.RuntimeConfig) error {
		if c.Kyma == nil {
			return apperr.BadRequest("config.kymaConfig", "runtime %s was provisioned without Kyma", runtimeID)
		}
		c.Kyma = kyma
		return nil
	})
	if err != nil {
		return nil, err
	}
	return operationStatus(op, rt)
}

// checkKymaUpgrade rejects, as start would, an upgrade of a runtime without Kyma or with an
// operation in progress.
func (s *Service) checkKymaUpgrade(ctx context.Context, tenant, runtimeID string) error {
	rt, err := s.runtime(ctx, tenant, runtimeID, false)
	if err != nil {
		return err
	}
	cfg, err := operations.DecodeRuntimeConfig(rt)
	if err != nil {
		return err
	}
	if cfg.Kyma == nil {
		return apperr.BadRequest("config.kymaConfig", "runtime %s was provisioned without Kyma", runtimeID)
	}
	active, err := s.store.Operations().ListOperations(ctx, storage.OperationFilter{
		InstanceIDs: []string{rt.ID}, States: []storage.OperationState{storage.StatePending, storage.StateInProgress}, Paging: storage.Paging{PageSize: 1},
	})
	if err != nil {
		return fmt.Errorf("listing operations of runtime %s: %w", rt.ID, err)
	}
	if len(active.Items) > 0 {
		return apperr.Conflict("runtime %s: %v: operation %s", runtimeID, storage.ErrOperationInProgress, active.Items[0].ID)
	}
	return nil
}

// storeSecrets adds secret configuration values to the runtime's encrypted secrets.
func (s *Service) storeSecrets(ctx context.Context, tenant, runtimeID string, secrets storage.Secrets) error {
	rt, err := s.runtime(ctx, tenant, runtimeID, false)
	if err != nil {
		return err
	}
	if rt.Secrets == nil {
		rt.Secrets = storage.Secrets{}
	}
	for k, v := range secrets {
		rt.Secrets[k] = v
	}
	if _, err := s.store.Runtimes().UpdateRuntime(ctx, rt); err != nil {
		return fmt.Errorf("storing secret configuration of runtime %s: %w", runtimeID, err)
	}
	return nil
}

func (s *Service) UpgradeShoot(ctx context.Context, tenant, runtimeID string, in gqlschema.UpgradeShootInput) (*gqlschema.OperationStatus, error) {
	op, rt, err := s.start(ctx, tenant, runtimeID, operations.TypeUpgradeShoot, func(c *operations.RuntimeConfig) error {
		var cur gqlschema.GardenerConfigInput
		if err := json.Unmarshal(c.Gardener, &cur); err != nil {
			return fmt.Errorf("decoding cluster configuration of runtime %s: %w", runtimeID, err)
		}
		if err := validateShootUpgrade(in, &cur); err != nil {
			return err
		}
		merged := mergeUpgrade(cur, in.GardenerConfig)
		cluster, err := clusterConfig(merged, c.Cluster.Name)
		if err != nil {
			return err
		}
		raw, err := json.Marshal(merged)
		if err != nil {
			return fmt.Errorf("encoding cluster configuration: %w", err)
		}
		c.Cluster, c.Gardener = cluster, raw
		if in.Administrators != nil {
			c.Administrators = in.Administrators
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return operationStatus(op, rt)
}

func (s *Service) HibernateRuntime(ctx context.Context, tenant, runtimeID string) (*gqlschema.OperationStatus, error) {
	op, rt, err := s.start(ctx, tenant, runtimeID, operations.TypeHibernate, nil)
	if err != nil {
		return nil, err
	}
	return operationStatus(op, rt)
}

func (s *Service) ReconnectRuntimeAgent(ctx context.Context, tenant, runtimeID string) (string, error) {
	op, _, err := s.start(ctx, tenant, runtimeID, operations.TypeReconnect, nil)
	if err != nil {
		return "", err
	}
	return op.ID, nil
}

// RuntimeOperationStatus reads only what the answer needs (the broker's waits poll it): not the
// operation's progress, data and secrets nor the runtime's configuration and secrets.
func (s *Service) RuntimeOperationStatus(ctx context.Context, tenant, operationID string) (*gqlschema.OperationStatus, error) {
	st, err := s.store.Runtimes().ReadRuntimeOperationStatus(ctx, operationID)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, apperr.NotFound("operation %s not found", operationID)
	}
	if err != nil {
		return nil, fmt.Errorf("reading operation %s: %w", operationID, err)
	}
	// Operations of deleted runtimes stay readable (a finished deprovisioning, for one).
	if !st.RuntimeFound || st.Tenant != tenant || !operations.IsType(st.Type) {
		return nil, apperr.NotFound("operation %s not found", operationID)
	}
	return statusOf(st)
}

func (s *Service) RuntimeStatus(ctx context.Context, tenant, runtimeID string) (*gqlschema.RuntimeStatus, error) {
	rt, err := s.runtime(ctx, tenant, runtimeID, false)
	if err != nil {
		return nil, err
	}
	ops, err := s.store.Operations().ListOperations(ctx, storage.OperationFilter{InstanceIDs: []string{rt.ID}, Paging: storage.Paging{PageSize: 1000}})
	if err != nil {
		return nil, fmt.Errorf("listing operations of runtime %s: %w", rt.ID, err)
	}
	out := &gqlschema.RuntimeStatus{RuntimeConnectionStatus: s.agentConnection(ctx, rt, connectionStatus(ops.Items)), HibernationStatus: hibernationStatus(ops.Items)}
	if len(ops.Items) > 0 {
		if out.LastOperationStatus, err = operationStatus(ops.Items[0], rt); err != nil {
			return nil, err
		}
	}
	s.freshKubeconfig(ctx, &rt)
	if out.RuntimeConfiguration, err = runtimeConfig(rt); err != nil {
		return nil, err
	}
	return out, nil
}

// RuntimeConfiguration is RuntimeStatus's runtimeConfiguration, from the runtime's row alone.
func (s *Service) RuntimeConfiguration(ctx context.Context, tenant, runtimeID string) (*gqlschema.RuntimeConfig, error) {
	rt, err := s.runtime(ctx, tenant, runtimeID, false)
	if err != nil {
		return nil, err
	}
	s.freshKubeconfig(ctx, &rt)
	return runtimeConfig(rt)
}

// freshKubeconfig replaces the runtime's kubeconfig by a new one when it is due
// (operations.FreshKubeconfig), so that consumers never get one about to expire; a failed
// renewal leaves the stored one (logged), which the next call tries again.
func (s *Service) freshKubeconfig(ctx context.Context, rt *storage.Runtime) {
	kc := rt.Secrets[operations.KubeconfigKey]
	if kc == "" {
		return
	}
	b, err := s.backends.Get(rt.Backend)
	if err != nil {
		return
	}
	cfg, err := operations.DecodeRuntimeConfig(*rt)
	if err != nil {
		return
	}
	fresh, renewed, err := operations.FreshKubeconfig(ctx, b, s.store.Runtimes(), operations.RuntimeSpec(rt.ID, rt.Tenant, cfg), kc, s.now())
	if err != nil {
		s.log.WithFields(logrus.Fields{"runtime_id": rt.ID, "error": err}).Warn("renewing the runtime's kubeconfig")
		return
	}
	if renewed {
		rt.Secrets[operations.KubeconfigKey] = fresh
	}
}

// runtimeConfig is the runtime's configuration as the API answers it.
func runtimeConfig(rt storage.Runtime) (*gqlschema.RuntimeConfig, error) {
	cfg, err := operations.DecodeRuntimeConfig(rt)
	if err != nil {
		return nil, err
	}
	cluster, err := gardenerOutput(cfg.Gardener)
	if err != nil {
		return nil, err
	}
	out := &gqlschema.RuntimeConfig{ClusterConfig: cluster, KymaConfig: kymaOutput(cfg.Kyma)}
	if kc := rt.Secrets[operations.KubeconfigKey]; kc != "" {
		out.Kubeconfig = &kc
	}
	if out.Allocation, err = allocationOutput(rt); err != nil {
		return nil, err
	}
	return out, nil
}
