package operations

import (
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
)

// waitUntil is waitFor for a backend that knows when its request will be done (st.DoneAt): the
// step runs again then, once, instead of every poll interval until then. Without a known time,
// or with less than a poll interval to go, it is waitFor.
func (d Deps) waitUntil(op Op, reason string, st infrastructure.Status) (Op, time.Duration, error) {
	out, wait, err := d.waitFor(op, reason)
	// On the engine's clock, which schedules the next run.
	if left := st.DoneAt.Sub(op.Now()); !st.DoneAt.IsZero() && left > wait {
		wait = left
	}
	return out, wait, err
}
