package provisioning

import (
	"context"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/avs"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
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
		InstanceIDTag(set, op.InstanceID),
	}
	if op.Data.ShootName != "" {
		tags = append(tags, avs.Tag{Content: op.Data.ShootName, TagClassID: set.ShootNameTagClassID, TagClassName: "ShootName"})
	}
	// Adding a tag the evaluation has is a no-op, so a retry repeats all of them safely. Each
	// answer lists the evaluation's tags: one it shows already (the instance's, given at the
	// creation) is not sent.
	var have []avs.Tag
	for _, tag := range tags {
		if hasTag(have, tag) {
			continue
		}
		ev, err := s.Systems.AVS.AddTag(ctx, op.Data.Resources.AVSInternalEvaluationID, tag)
		if err != nil {
			wait, err := s.Systems.Retry(&op, "AVS", "tagging the internal evaluation", err, s.PollInterval)
			return op, wait, err
		}
		if ev != nil {
			have = ev.Tags
		}
	}
	op.Data.Resources.AVSTagged, op.LastError = true, ""
	return op, 0, nil
}

// InstanceIDTag is the internal evaluation's tag with the instance ID.
func InstanceIDTag(set systems.AVSSettings, instanceID string) avs.Tag {
	return avs.Tag{Content: instanceID, TagClassID: set.InstanceIDTagClassID, TagClassName: "InstanceID"}
}

// hasTag tells whether tags hold t (AVS tells tags apart by class and content).
func hasTag(tags []avs.Tag, t avs.Tag) bool {
	for _, have := range tags {
		if have.TagClassID == t.TagClassID && have.Content == t.Content {
			return true
		}
	}
	return false
}
