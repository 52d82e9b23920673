package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// ExpiryJob expires trial and free instances older than their plan's expiry_days.
type ExpiryJob struct {
	Expirer Expirer
	Clock   Clock
	Log     logrus.FieldLogger
	// Batch bounds one round [100]; the next round takes the rest.
	Batch int
}

// Due lists live, not yet expired instances that expire by at (now: due now; now + window:
// what will expire within it), oldest first.
func Due(ctx context.Context, store storage.Store, x Expirer, at time.Time, p storage.Paging) (storage.Page[storage.RuntimeRow], error) {
	notExpired := false
	return store.Lifecycle().FindRuntimes(ctx, storage.RuntimeQuery{Expired: &notExpired, CreatedBefore: x.CreatedBefore(at), InstanceFilter: storage.InstanceFilter{Paging: p}})
}

// Round expires what is due now; it returns how many instances it expired. Busy instances
// (another operation running) are left for a later round.
func (j ExpiryJob) Round(ctx context.Context) (int, error) {
	now := j.Clock.Now()
	batch := j.Batch
	if batch <= 0 {
		batch = 100
	}
	page, err := Due(ctx, j.Expirer.Store, j.Expirer, now, storage.Paging{PageSize: batch, WithoutTotal: true})
	if err != nil {
		return 0, fmt.Errorf("listing instances due to expire: %w", err)
	}
	n := 0
	for _, rt := range page.Items {
		log := j.Log.WithFields(logrus.Fields{"instance_id": rt.InstanceID, "plan_id": rt.PlanID, "created_at": rt.CreatedAt})
		out, err := j.Expirer.Expire(ctx, rt.InstanceID, now)
		switch {
		case errors.Is(err, ErrBusy):
			log.WithError(err).Info("instance due to expire is busy; expiring it in a later round")
			continue
		case err != nil:
			return n, fmt.Errorf("expiring instance %s: %w", rt.InstanceID, err)
		}
		n++
		log.WithField("operation_id", out.OperationID).Info("instance expired: its lifetime is over")
	}
	return n, nil
}
