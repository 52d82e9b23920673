package update

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

type instanceUpdate = instance.UpdateData

// UpdateInstance records the new plan and parameters on the instance once the runtime has them.
type UpdateInstance struct{ Deps }

func (UpdateInstance) Name() string { return "Update_Instance_Parameters" }

func (s UpdateInstance) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	raw, err := json.Marshal(op.Data.Parameters)
	if err != nil {
		return op, 0, fmt.Errorf("encoding parameters: %w", err)
	}
	if _, err := storage.ModifyInstance(ctx, s.Instances, op.InstanceID, func(i *storage.Instance) {
		i.Parameters, i.PlanID = raw, op.Data.PlanID
	}); err != nil {
		op.LastError = fmt.Sprintf("storing the instance's parameters: %v", err)
		return op, s.PollInterval, nil
	}
	return op, 0, nil
}
