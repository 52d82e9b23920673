// Package gcpolicy sets the broker's garbage collection target. The broker keeps little alive
// (its state is in the database) and allocates fast while it works (request bodies, JSON
// documents, the driver's buffers), so at Go's default GOGC=100 the collector runs often; at
// 200 it runs half as often, for about one more live heap of memory (the measurements are in
// docs/contributor/performance.md).
package gcpolicy

import (
	"os"
	"runtime/debug"

	"github.com/sirupsen/logrus"
)

// DefaultPercent is the GOGC the broker runs with unless GOGC is set.
const DefaultPercent = 200

// Apply sets GOGC to DefaultPercent unless the environment sets GOGC (Go's own variable, which
// the runtime has already applied: it wins, "off" included). GOMEMLIMIT keeps its meaning: a
// memory limit makes the collector work harder near it whatever GOGC says.
func Apply(log logrus.FieldLogger) {
	if v, set := os.LookupEnv("GOGC"); set {
		log.WithField("gogc", v).Info("garbage collection target from GOGC")
		return
	}
	debug.SetGCPercent(DefaultPercent)
	log.WithField("gogc", DefaultPercent).Info("garbage collection target (set GOGC to change it)")
}
