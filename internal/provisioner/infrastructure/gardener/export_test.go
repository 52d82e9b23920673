package gardener

import "time"

// SetClock makes the backend read the time from now (renewal tests).
func (b *Backend) SetClock(now func() time.Time) { b.now = now }
