package engine

import (
	"context"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// A step's writes of single fields of its operation's instance (or, for an operation of the
// provisioner, of its runtime) ride on the operation's next write (storage.Save.Instance,
// Runtime: the same statement or transaction) instead of a statement of their own. A step
// whose outcome is written right after it (not local, read-only or idempotent) has them
// written before the next step runs; the others' ride on the next write, as their outcome does.

// deferralKey is the context key of the run a step runs in.
type deferralKey struct{}

// deferral is a run that takes fields of its operation's instance or runtime to write with its
// next save.
type deferral interface {
	deferFields(id string, set func(with *storage.Save)) bool
}

func (r *run[T]) deferFields(id string, set func(with *storage.Save)) bool {
	if id == "" || id != r.op.InstanceID {
		return false
	}
	set(&r.deferred)
	return true
}

// deferTo has the run of ctx, if any and of an operation of id, apply set to its operation;
// false when ctx is not a step run by the engine for id's operation.
func deferTo(ctx context.Context, id string, set func(with *storage.Save)) bool {
	d, ok := ctx.Value(deferralKey{}).(deferral)
	return ok && d.deferFields(id, set)
}

// DeferInstanceFields makes the fields of instance id that a step sets ride on the next write
// of the operation it runs for, and reports whether it did: only in a step run by the engine,
// for the operation's own instance. Else the caller writes them itself.
func DeferInstanceFields(ctx context.Context, id string, f storage.InstanceFields) bool {
	return deferTo(ctx, id, func(with *storage.Save) { with.Instance = with.Instance.Merge(f) })
}

// DeferRuntimeFields is DeferInstanceFields for the provisioner's runtime an operation is of
// (its InstanceID).
func DeferRuntimeFields(ctx context.Context, id string, f storage.RuntimeFields) bool {
	return deferTo(ctx, id, func(with *storage.Save) { with.Runtime = with.Runtime.Merge(f) })
}

// DeferringInstances is Instances whose SetInstanceFields, called in a step the engine runs
// for an operation of that instance, rides on the operation's next write (DeferInstanceFields).
// Elsewhere it writes at once.
type DeferringInstances struct{ storage.Instances }

func (d DeferringInstances) SetInstanceFields(ctx context.Context, id string, f storage.InstanceFields) error {
	if DeferInstanceFields(ctx, id, f) {
		return nil
	}
	return d.Instances.SetInstanceFields(ctx, id, f)
}

// DeferringRuntimes is DeferringInstances for the provisioner's runtimes (SetRuntimeFields).
type DeferringRuntimes struct{ storage.Runtimes }

func (d DeferringRuntimes) SetRuntimeFields(ctx context.Context, id string, f storage.RuntimeFields) error {
	if DeferRuntimeFields(ctx, id, f) {
		return nil
	}
	return d.Runtimes.SetRuntimeFields(ctx, id, f)
}
