package provisioning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/servicemanager"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// ProvisionEMS provisions an Enterprise Messaging instance through the Service Manager, waits for
// it, binds it and gives the binding's credentials to the eventing component.
type ProvisionEMS struct{ Deps }

func (ProvisionEMS) Name() string { return "Provision EMS" }

// EMS offering and the eventing overrides it fills.
const (
	EMSOffering          = "enterprise-messaging"
	EMSPlan              = "default"
	EventingComponent    = "eventing"
	EMSCredentialsKey    = "authentication.ems.credentials"
	EMSEnabledKey        = "global.eventing.backend.ems.enabled"
	servicemanagerSystem = "Service Manager (EMS)"
)

// EMSName is the name of the EMS service instance and binding an operation creates: per
// operation, because a resumed trial must not find its suspended runtime's instance, which
// the Service Manager may still be deleting.
func EMSName(operationID string) string { return "kyma-ems-" + operationID }

func (s ProvisionEMS) Run(ctx context.Context, op Op, log logrus.FieldLogger) (Op, time.Duration, error) {
	wait, err := EnsureEMS(ctx, s.Systems, &op, s.PollInterval, &op.Data.Resources, &op.Data.Overrides, &op.Secrets, EMSName(op.ID), op.InstanceID, log)
	return op, wait, err
}

// EnsureEMS is the work of the Provision EMS steps of provisioning and upgrades: it provisions
// and binds EMS (named name) with the operation's Service Manager credentials and sets
// the eventing overrides, answering as a step does: poll again while the instance is not ready,
// retry a failing Service Manager within the retry window.
func EnsureEMS(ctx context.Context, sys systems.Systems, op systems.Step, poll time.Duration, res *instance.Resources, o *overrides.Overrides, secrets *storage.Secrets, name, instanceID string, log logrus.FieldLogger) (time.Duration, error) {
	creds, ok := sys.SMCredentials(*secrets)
	if !ok {
		return 0, errors.New("Service Manager (EMS): no credentials in the context and none configured")
	}
	wait, err := ensureEMS(ctx, sys.ServiceManager, creds, res, o, secrets, name, instanceID, log)
	if err != nil {
		return sys.Retry(op, servicemanagerSystem, "provisioning Enterprise Messaging", err, poll)
	}
	if wait > 0 {
		op.SetLastError("waiting for the Enterprise Messaging instance to be ready")
		return poll, nil
	}
	op.SetLastError("")
	return 0, nil
}

func ensureEMS(ctx context.Context, sm systems.ServiceManager, creds servicemanager.Credentials, res *instance.Resources, o *overrides.Overrides, secrets *storage.Secrets, name, instanceID string, log logrus.FieldLogger) (time.Duration, error) {
	// The instance as ProvisionInstance answered: read just now, so it tells readiness as a
	// GetInstance would.
	var inst *servicemanager.Instance
	if res.EMSInstanceID == "" {
		var err error
		inst, err = sm.ProvisionInstance(ctx, creds, servicemanager.InstanceRequest{
			Name: name, OfferingName: EMSOffering, PlanName: EMSPlan,
			Labels: map[string][]string{"instance_id": {instanceID}},
		})
		if err != nil {
			return 0, fmt.Errorf("creating the service instance: %w", err)
		}
		res.EMSInstanceID = inst.ID
		log.WithField("ems_instance_id", inst.ID).Info("EMS instance requested")
	}
	if res.EMSBindingID == "" {
		if inst == nil {
			var err error
			if inst, err = sm.GetInstance(ctx, creds, res.EMSInstanceID); err != nil {
				return 0, fmt.Errorf("reading the service instance: %w", err)
			}
		}
		if lo := inst.LastOperation; lo != nil && lo.State == servicemanager.StateFailed {
			return 0, clientkit.Permanent(fmt.Errorf("the service instance failed: %s", lo.Description))
		}
		if !inst.Ready {
			return time.Second, nil
		}
	}
	b, err := sm.Bind(ctx, creds, servicemanager.BindingRequest{Name: name, InstanceID: res.EMSInstanceID})
	if err != nil {
		return 0, fmt.Errorf("binding the service instance: %w", err)
	}
	res.EMSBindingID = b.ID
	raw, err := json.Marshal(b.Credentials)
	if err != nil {
		return 0, clientkit.Permanent(fmt.Errorf("encoding the binding's credentials: %w", err))
	}
	o.Set(secrets, EventingComponent,
		overrides.Entry{Key: EMSEnabledKey, Value: "true"},
		overrides.Entry{Key: EMSCredentialsKey, Value: string(raw), Secret: true})
	return 0, nil
}
