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
	// A Kyma upgrade that failed before its initialisation knows nothing: skip it. Look further
	// back page by page; a provisioning always ends the search.
	for p := 1; ; p++ {
		page, err := ops.ListOperations(ctx, storage.OperationFilter{
			InstanceIDs: []string{instanceID}, Types: []string{TypeProvision, TypeUpgradeKyma},
			States: []storage.OperationState{storage.StateSucceeded, storage.StateFailed}, Paging: storage.Paging{Page: p, PageSize: 20},
		})
		if err != nil {
			return Provisioned{}, fmt.Errorf("reading the instance's provisioning: %w", err)
		}
		for _, op := range page.Items {
			var data struct {
				Resources   Resources           `json:"resources"`
				Overrides   overrides.Overrides `json:"overrides"`
				Initialized bool                `json:"initialized"`
			}
			if err := json.Unmarshal(op.Data, &data); err != nil {
				return Provisioned{}, fmt.Errorf("decoding %s operation %s: %w", op.Type, op.ID, err)
			}
			if op.Type == TypeUpgradeKyma && !data.Initialized {
				continue
			}
			return Provisioned{OperationID: op.ID, Resources: data.Resources, Overrides: data.Overrides, Secrets: op.Secrets}, nil
		}
		if p*20 >= page.TotalCount {
			return Provisioned{}, nil
		}
	}
}
