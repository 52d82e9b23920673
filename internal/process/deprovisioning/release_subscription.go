package deprovisioning

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// ReleaseSubscription gives up the global account's hyperscaler account once its last runtime
// is gone: the binding the instance's provisioning resolved is marked dirty for the cleanup
// when no Shoot names it any more and no other live instance of the global account resolved
// it (one still provisioning may not have its Shoot yet). Shared and internal accounts stay.
// It runs after Remove_Runtime, and only with a pool that assigns accounts (Gardener's).
type ReleaseSubscription struct{ Deps }

func (ReleaseSubscription) Name() string { return "Release_Subscription" }

func (s ReleaseSubscription) Run(ctx context.Context, op Op, log logrus.FieldLogger) (Op, time.Duration, error) {
	pool := s.Systems.AccountPool
	if pool == nil || pool.Stateless() {
		return op, 0, nil
	}
	tenant := op.Data.GlobalAccountID
	binding, err := targetSecret(ctx, s.Operations, op.InstanceID)
	if err != nil {
		return op, s.Systems.Cleanup(&op, "hyperscaler account pool", "reading the instance's account", err, s.PollInterval), nil
	}
	if binding == "" {
		log.Info("no hyperscaler account was resolved for the instance: nothing to release")
		return op, 0, nil
	}
	log = log.WithFields(logrus.Fields{"target_secret": binding, "global_account_id": tenant})
	other, err := s.otherInstanceUses(ctx, op.InstanceID, tenant, binding)
	if err != nil {
		return op, s.Systems.Cleanup(&op, "hyperscaler account pool", "reading the global account's instances", err, s.PollInterval), nil
	}
	if other != "" {
		log.WithField("other_instance_id", other).Info("hyperscaler account still used by another instance: kept")
		op.LastError = ""
		return op, 0, nil
	}
	released, err := pool.Release(ctx, binding, tenant)
	if err != nil {
		return op, s.Systems.Cleanup(&op, "hyperscaler account pool", "releasing account "+binding, err, s.PollInterval), nil
	}
	log.WithField("released", released).Info("hyperscaler account checked")
	op.LastError = ""
	return op, 0, nil
}

// targetSecret is the account the instance's latest provisioning resolved ("" when none did).
func targetSecret(ctx context.Context, ops storage.Operations, instanceID string) (string, error) {
	for p := 1; ; p++ {
		page, err := ops.ListOperations(ctx, storage.OperationFilter{
			InstanceIDs: []string{instanceID}, Types: []string{instance.TypeProvision}, Paging: storage.Paging{Page: p, PageSize: 20},
		})
		if err != nil {
			return "", fmt.Errorf("listing the provisionings of instance %s: %w", instanceID, err)
		}
		for _, o := range page.Items {
			var d struct {
				TargetSecret string `json:"target_secret"`
			}
			if err := json.Unmarshal(o.Data, &d); err != nil {
				return "", fmt.Errorf("decoding provisioning %s: %w", o.ID, err)
			}
			if d.TargetSecret != "" {
				return d.TargetSecret, nil
			}
		}
		if len(page.Items) < 20 {
			return "", nil
		}
	}
}

// otherInstanceUses names a live instance of the global account, other than this one, whose
// provisioning resolved binding.
func (s ReleaseSubscription) otherInstanceUses(ctx context.Context, self, tenant, binding string) (string, error) {
	for p := 1; ; p++ {
		page, err := s.Instances.ListInstances(ctx, storage.InstanceFilter{GlobalAccountIDs: []string{tenant}, Paging: storage.Paging{Page: p, PageSize: 100}})
		if err != nil {
			return "", fmt.Errorf("listing the instances of global account %s: %w", tenant, err)
		}
		for _, inst := range page.Items {
			if inst.InstanceID == self || inst.DeletedAt != nil {
				continue
			}
			used, err := targetSecret(ctx, s.Operations, inst.InstanceID)
			if err != nil {
				return "", err
			}
			if used == binding {
				return inst.InstanceID, nil
			}
		}
		if len(page.Items) < 100 {
			return "", nil
		}
	}
}
