package provisioning

import (
	"context"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/avs"
	"github.com/sirupsen/logrus"
)

// AVSTags tags the internal evaluation with what is known only once the runtime exists (its ID,
// shoot and instance), so AVS alerts can be traced to the runtime.
type AVSTags struct{ Deps }

func (AVSTags) Name() string { return "AVS_Tags" }

func (s AVSTags) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	if op.Data.Resources.AVSTagged || op.Data.Resources.AVSInternalEvaluationID == 0 {
		return op, 0, nil
	}
	set := s.Systems.AVSSettings
	tags := []avs.Tag{
		{Content: op.Data.RuntimeID, TagClassID: set.RuntimeIDTagClassID, TagClassName: "RuntimeID"},
		{Content: op.InstanceID, TagClassID: set.InstanceIDTagClassID, TagClassName: "InstanceID"},
	}
	if op.Data.ShootName != "" {
		tags = append(tags, avs.Tag{Content: op.Data.ShootName, TagClassID: set.ShootNameTagClassID, TagClassName: "ShootName"})
	}
	// Adding a tag the evaluation has is a no-op, so a retry repeats all of them safely.
	for _, tag := range tags {
		if _, err := s.Systems.AVS.AddTag(ctx, op.Data.Resources.AVSInternalEvaluationID, tag); err != nil {
			wait, err := s.Systems.Retry(&op, "AVS", "tagging the internal evaluation", err, s.PollInterval)
			return op, wait, err
		}
	}
	op.Data.Resources.AVSTagged, op.LastError = true, ""
	return op, 0, nil
}
