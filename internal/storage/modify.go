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

// ModifyRuntime is ModifyInstance for the provisioner's runtimes; change may refuse with an error.
func ModifyRuntime(ctx context.Context, runtimes Runtimes, id string, change func(*Runtime) error) (Runtime, error) {
	for attempt := 0; ; attempt++ {
		rt, err := runtimes.GetRuntime(ctx, id)
		if err != nil {
			return Runtime{}, err
		}
		if err := change(&rt); err != nil {
			return Runtime{}, err
		}
		out, err := runtimes.UpdateRuntime(ctx, rt)
		if errors.Is(err, ErrConflict) && attempt == 0 {
			continue
		}
		return out, err
	}
}
