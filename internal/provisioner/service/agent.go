package service

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/compass"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// How the agents' reports are read: each read bounded (a slow Director delays a status read by
// at most this), and kept a while, so that a page of runtimes or a polling client does not ask
// the Director for every read.
const (
	conditionReadTimeout = 3 * time.Second
	conditionTTL         = 10 * time.Second
	conditionCacheSize   = 10000
)

// ReadConditionsFrom makes RuntimeStatus's runtimeConnectionStatus follow the status condition
// the Runtime Agent reports in the Director (r), as far as the provisioner's own operations let
// it (a connection being set up stays Pending).
func (s *Service) ReadConditionsFrom(r compass.ConditionReader) {
	s.conditions = &conditionCache{reader: r, entries: map[string]conditionEntry{}}
}

type conditionEntry struct {
	condition string
	err       error
	at        time.Time
}

// conditionCache reads conditions through reader, keeping each for conditionTTL.
type conditionCache struct {
	reader  compass.ConditionReader
	mu      sync.Mutex
	entries map[string]conditionEntry // by tenant and Compass ID
}

func (c *conditionCache) get(ctx context.Context, now time.Time, tenant, compassID string) (string, error) {
	key := tenant + "/" + compassID
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < conditionTTL && now.Sub(e.at) >= 0 {
		return e.condition, e.err
	}
	ctx, cancel := context.WithTimeout(ctx, conditionReadTimeout)
	defer cancel()
	cond, err := c.reader.RuntimeStatusCondition(ctx, tenant, compassID)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= conditionCacheSize {
		c.entries = map[string]conditionEntry{} // bounded: start over rather than grow
	}
	c.entries[key] = conditionEntry{condition: cond, err: err, at: now}
	return cond, err
}

// agentConnection is base (the status the operations give) corrected by the agent's report: a
// connected runtime whose agent reports FAILED is Disconnected. Only that way: CONNECTED is also
// what the provisioner itself sets when it hands out a token, so it does not prove a connection
// the operations say failed. A runtime still being connected stays Pending, and a Director that
// cannot be read leaves base, saying so.
func (s *Service) agentConnection(ctx context.Context, rt storage.Runtime, base *gqlschema.RuntimeConnectionStatus) *gqlschema.RuntimeConnectionStatus {
	if s.conditions == nil || rt.CompassRuntimeID == "" || base.Status == gqlschema.RuntimeAgentConnectionStatusPending {
		return base
	}
	cond, err := s.conditions.get(ctx, s.now(), rt.Tenant, rt.CompassRuntimeID)
	if err != nil {
		s.log.WithFields(logrus.Fields{"runtime_id": rt.ID, "error": err}).Warn("reading the agent's status condition in the Director")
		msg := fmt.Sprintf("the Runtime Agent's state in the Director could not be read: %v", err)
		out := *base
		out.Errors = append(append([]*gqlschema.Error{}, base.Errors...), &gqlschema.Error{Message: &msg})
		return &out
	}
	if cond != compass.ConditionFailed {
		return base
	}
	msg := "the Runtime Agent reports FAILED in the Director: it lost or is losing its connection to Compass; " +
		"if its certificate was revoked or has expired, reconnectRuntimeAgent gives it a new one-time token"
	return &gqlschema.RuntimeConnectionStatus{Status: gqlschema.RuntimeAgentConnectionStatusDisconnected, Errors: []*gqlschema.Error{{Message: &msg}}}
}
