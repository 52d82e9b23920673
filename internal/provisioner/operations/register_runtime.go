package operations

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/compass"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// RegisterRuntime registers the runtime in the Director with the status condition PROVISIONING
// and keeps its Compass ID.
type RegisterRuntime struct{ Deps }

func (RegisterRuntime) Name() string { return "Register_Runtime" }

func (s RegisterRuntime) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	if op.Data.CompassRuntimeID != "" {
		return op, 0, nil
	}
	// Registered with its condition in one request; a rerun finds it (the Director is asked for
	// the runtime with this runtime ID first) and sets the condition if it differs.
	// Only the labels the Director accepts: the provisioner's own (idempotency key, backend) have
	// keys it refuses.
	labels := compass.DirectorLabels(op.Data.Config.Labels)
	id, err := s.Director.RegisterRuntime(ctx, op.Data.Tenant, op.Data.RuntimeID, op.Data.Config.Cluster.Name, compass.ConditionProvisioning, labels)
	if err != nil {
		return s.directorFailed(op, "registering the runtime", err)
	}
	if err := s.Runtimes.SetRuntimeFields(ctx, op.Data.RuntimeID, storage.RuntimeFields{CompassRuntimeID: &id}); err != nil {
		return s.waitFor(op, fmt.Sprintf("storing the Compass runtime ID: %v", err))
	}
	op.Data.CompassRuntimeID = id
	return op, 0, nil
}
