// Package lifecycle ends what should not live forever: trial and free instances expire (by the
// operator's PUT /expire/service_instance/{id} or by the expiry job after the plan's
// expiry_days), and deprovisioning steps left executed but not completed are run again by the
// re-trigger job until done or too old, then reported as orphaned resources.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

var (
	// ErrNotExpirable: the instance's plan has no expiry (only trial and free expire).
	ErrNotExpirable = errors.New("only instances of plans with an expiry (trial, free) can be expired")
	// ErrBusy: another operation of the instance is running; expire it when it has finished.
	ErrBusy = errors.New("another operation of the instance is in progress")
)

// Expirer expires instances: their runtime is removed by a suspension, the instance stays
// with expired_at set, updates are refused and deprovisioning still works.
type Expirer struct {
	Store storage.Store
	// ExpiryDays: plan ID -> lifetime in days (plans without an entry never expire).
	ExpiryDays map[string]int
	// OperationTimeout is the suspension's deadline.
	OperationTimeout time.Duration
	// EngineClock is the step engine's (the suspension is due at its now); the wall clock
	// when nil. The expiry itself is decided on the caller's clock.
	EngineClock Clock
}

// Expired is the outcome of an expiry (the API's answer).
type Expired = runtime.Expired

// Lifetime is how long instances of the plan live (0: forever).
func (x Expirer) Lifetime(planID string) time.Duration {
	return time.Duration(x.ExpiryDays[planID]) * 24 * time.Hour
}

func engineNow(c Clock) time.Time {
	if c == nil {
		return time.Now()
	}
	return c.Now()
}

// CreatedBefore maps each plan with an expiry to the creation time before which its
// instances have expired by at.
func (x Expirer) CreatedBefore(at time.Time) map[string]time.Time {
	out := map[string]time.Time{}
	for plan := range x.ExpiryDays {
		if life := x.Lifetime(plan); life > 0 {
			out[plan] = at.Add(-life)
		}
	}
	return out
}

// Expire expires the instance at now. A repeat is answered with the earlier expiry; a
// suspension that failed is started again. Errors: storage.ErrNotFound (unknown or
// deprovisioned), ErrNotExpirable, ErrBusy (with the running operation).
func (x Expirer) Expire(ctx context.Context, instanceID string, now time.Time) (Expired, error) {
	inst, err := x.Store.Instances().GetInstance(ctx, instanceID)
	if err != nil {
		return Expired{}, err
	}
	if inst.DeletedAt != nil {
		return Expired{}, fmt.Errorf("instance %s was deprovisioned: %w", instanceID, storage.ErrNotFound)
	}
	if x.Lifetime(inst.PlanID) == 0 {
		return Expired{}, ErrNotExpirable
	}
	page, err := x.Store.Operations().ListOperations(ctx, storage.OperationFilter{InstanceIDs: []string{instanceID}, Paging: storage.Paging{PageSize: 1, WithoutTotal: true}})
	if err != nil {
		return Expired{}, fmt.Errorf("reading the operations of %s: %w", instanceID, err)
	}
	var last storage.Operation
	if len(page.Items) > 0 {
		last = page.Items[0]
	}
	if last.State.Active() {
		return Expired{}, fmt.Errorf("%w: %s operation %s", ErrBusy, last.Type, last.ID)
	}
	suspension := last.Type == instance.TypeSuspension
	out := Expired{InstanceID: instanceID, ExpiredAt: now.UTC().Truncate(time.Microsecond)}
	if inst.ExpiredAt != nil {
		out.ExpiredAt = *inst.ExpiredAt
		if !suspension || last.State == storage.StateSucceeded {
			out.AlreadyExpired, out.OperationID = true, last.ID
			return out, nil
		}
		// Expired, but its suspension failed: start it again.
	}
	op := storage.Operation{InstanceID: instanceID} // no new operation: the runtime is gone already
	if !suspension || last.State != storage.StateSucceeded {
		if op, err = engine.NewOperation(instance.TypeSuspension, instanceID, instance.DeprovisioningData{GlobalAccountID: inst.GlobalAccountID}, x.OperationTimeout, engineNow(x.EngineClock)); err != nil {
			return Expired{}, err
		}
	}
	stored, err := x.Store.Lifecycle().ExpireWithOperation(ctx, op, out.ExpiredAt, instance.AllTypes())
	var running *storage.InProgressError
	if errors.As(err, &running) {
		return Expired{}, fmt.Errorf("%w: %s operation %s", ErrBusy, running.Operation.Type, running.Operation.ID)
	}
	if err != nil {
		return Expired{}, err
	}
	out.OperationID = stored.ID
	if stored.ID == "" {
		out.OperationID = last.ID
	}
	return out, nil
}
