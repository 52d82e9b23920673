// Package broker implements the Open Service Broker API (through brokerapi v10) for Kyma
// runtimes: handlers validate, store the instance and its operation, and return; the step
// engine does the work. Handlers never call external systems (binding reads the runtime's
// kubeconfig through the provisioner client, synchronously, as OSB bindings are).
package broker

import (
	"context"
	"encoding/json"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/sirupsen/logrus"
)

// ServiceID is KEB's kymaruntime service.
const ServiceID = "47c9dcbf-ff30-448e-ab36-d3bad66ba281"

// Plan is what the broker needs to know about a plan.
type Plan struct {
	ID, Name string
	Trial    bool
}

// Validated is a provisioning request after the catalog checked it.
type Validated struct {
	Parameters instance.Parameters
	Context    instance.Context
	Provider   string
	// SMCredentials are the context's sm_operator_credentials, when given.
	SMCredentials *instance.SMCredentials
}

// Catalog is the plans configuration: the OSB catalog and parameter validation. Its errors
// name the offending field.
type Catalog interface {
	Services(platformRegion string) []domain.Service
	Plan(id string) (Plan, bool)
	ValidateProvision(planID, platformRegion string, rawParams, rawContext json.RawMessage) (Validated, error)
	// ValidateUpdate checks rawParams against the update schema of planID and returns the
	// instance's parameters with the changes applied.
	ValidateUpdate(planID string, current instance.Parameters, rawParams json.RawMessage) (instance.Parameters, error)
	CanUpgrade(fromPlanID, toPlanID string) bool
	// Active is the context's "active" flag (nil when absent).
	Active(rawContext json.RawMessage) (*bool, error)
}

// Config tunes the broker.
type Config struct {
	// OperationTimeout is the deadline of provisioning, deprovisioning and update operations.
	OperationTimeout time.Duration `envconfig:"BROKER_OPERATION_TIMEOUT" default:"24h"`
	// UpgradeTimeout is the deadline of Kyma and cluster upgrades (seed 001: 3h).
	UpgradeTimeout time.Duration `envconfig:"BROKER_UPGRADE_TIMEOUT" default:"3h"`
	// DefaultRequestRegion is the platform region of /oauth/v2 and /v2 requests.
	DefaultRequestRegion string `envconfig:"BROKER_DEFAULT_REQUEST_REGION" default:"cf-eu10"`
}

// Broker implements domain.ServiceBroker.
type Broker struct {
	store       storage.Store
	catalog     Catalog
	provisioner client.Client
	cfg         Config
	now         func() time.Time
	log         logrus.FieldLogger
}

var _ domain.ServiceBroker = (*Broker)(nil)

// New returns the broker.
func New(store storage.Store, catalog Catalog, provisioner client.Client, cfg Config, log logrus.FieldLogger) *Broker {
	return &Broker{store: store, catalog: catalog, provisioner: provisioner, cfg: cfg, now: time.Now, log: log}
}

type regionKey struct{}

// WithRegion records the platform region of the request (the /oauth/{region} segment).
func WithRegion(ctx context.Context, region string) context.Context {
	return context.WithValue(ctx, regionKey{}, region)
}

func (b *Broker) region(ctx context.Context) string {
	if r, ok := ctx.Value(regionKey{}).(string); ok && r != "" {
		return r
	}
	return b.cfg.DefaultRequestRegion
}

func (b *Broker) Services(ctx context.Context) ([]domain.Service, error) {
	return b.catalog.Services(b.region(ctx)), nil
}

// latestOperation is the instance's newest operation, optionally of one type.
func (b *Broker) latestOperation(ctx context.Context, instanceID string, types ...string) (storage.Operation, bool, error) {
	page, err := b.store.Operations().ListOperations(ctx, storage.OperationFilter{InstanceIDs: []string{instanceID}, Types: types, Paging: storage.Paging{PageSize: 1, WithoutTotal: true}})
	if err != nil || len(page.Items) == 0 {
		return storage.Operation{}, false, err
	}
	return page.Items[0], true, nil
}

func (b *Broker) activeOperation(ctx context.Context, instanceID string) (storage.Operation, bool, error) {
	page, err := b.store.Operations().ListOperations(ctx, storage.OperationFilter{
		InstanceIDs: []string{instanceID}, States: []storage.OperationState{storage.StatePending, storage.StateInProgress}, Paging: storage.Paging{PageSize: 1, WithoutTotal: true},
	})
	if err != nil || len(page.Items) == 0 {
		return storage.Operation{}, false, err
	}
	return page.Items[0], true, nil
}

type requestIDKey struct{}

func withRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// logFor is the request's logger: instance and request ID as fields.
func (b *Broker) logFor(ctx context.Context, instanceID string) logrus.FieldLogger {
	l := b.log.WithField("instance_id", instanceID)
	if id, ok := ctx.Value(requestIDKey{}).(string); ok {
		l = l.WithField("request_id", id)
	}
	return l
}
