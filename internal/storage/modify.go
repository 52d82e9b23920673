package storage

import (
	"context"
	"errors"
)

// ModifyInstance applies change to the stored instance and writes it, re-reading and
// re-applying once if another writer got there first (optimistic locking).
func ModifyInstance(ctx context.Context, instances Instances, id string, change func(*Instance)) (Instance, error) {
	for attempt := 0; ; attempt++ {
		inst, err := instances.GetInstance(ctx, id)
		if err != nil {
			return Instance{}, err
		}
		change(&inst)
		out, err := instances.UpdateInstance(ctx, inst)
		if errors.Is(err, ErrConflict) && attempt == 0 {
			continue
		}
		return out, err
	}
}
