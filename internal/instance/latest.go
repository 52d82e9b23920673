package instance

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Provisioned is what the latest finished provisioning or Kyma upgrade of an instance left: the
// external resources in place and the overrides the runtime runs with.
type Provisioned struct {
	// OperationID is the operation it was read from; empty when there was none.
	OperationID string
	Resources   Resources
	Overrides   overrides.Overrides
	// Secrets are the operation's secrets (the overrides' secret values).
	Secrets storage.Secrets
}

// LatestProvisioned reads it. Upgrades create and remove resources (EMS, Event Hubs), so the
// newest of both kinds is the truth.
func LatestProvisioned(ctx context.Context, ops storage.Operations, instanceID string) (Provisioned, error) {
	page, err := ops.ListOperations(ctx, storage.OperationFilter{
		InstanceIDs: []string{instanceID}, Types: []string{TypeProvision, TypeUpgradeKyma},
		States: []storage.OperationState{storage.StateSucceeded, storage.StateFailed}, Paging: storage.Paging{PageSize: 1},
	})
	if err != nil {
		return Provisioned{}, fmt.Errorf("reading the instance's provisioning: %w", err)
	}
	if len(page.Items) == 0 {
		return Provisioned{}, nil
	}
	op := page.Items[0]
	var data struct {
		Resources Resources           `json:"resources"`
		Overrides overrides.Overrides `json:"overrides"`
	}
	if err := json.Unmarshal(op.Data, &data); err != nil {
		return Provisioned{}, fmt.Errorf("decoding %s operation %s: %w", op.Type, op.ID, err)
	}
	return Provisioned{OperationID: op.ID, Resources: data.Resources, Overrides: data.Overrides, Secrets: op.Secrets}, nil
}
