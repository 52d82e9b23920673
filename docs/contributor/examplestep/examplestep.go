// Package examplestep is the step that docs/contributor/adding-a-step.md walks through. It is
// compiled and tested like every step, and the guide quotes it verbatim (a test checks that).
package examplestep

import (
	"context"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/sirupsen/logrus"
)

// Data is the process's payload: what later steps, and a run after a crash, need.
type Data struct {
	SubaccountID string `json:"subaccountId"`
	TicketID     string `json:"ticketId,omitempty"`
}

// Op is the operation the step sees.
type Op = engine.Operation[Data]

// Tickets is the narrow interface of the external system the step calls; the real client
// (internal/clients/<system>) implements it and makes a bounded attempt per call.
type Tickets interface {
	FindTicket(ctx context.Context, key string) (id string, found bool, err error)
	CreateTicket(ctx context.Context, key, subaccountID string) (id string, err error)
}

// OpenTicket opens a ticket for the operation's subaccount, once.
type OpenTicket struct {
	Tickets Tickets
	// Systems answers the system's errors: a temporary one is retried for Systems.RetryTime,
	// a permanent one fails the operation at once, and the message names the system.
	Systems      systems.Systems
	PollInterval time.Duration
}

// Name is the step's name in the operation's progress, events and docs.
func (OpenTicket) Name() string { return "Open_Ticket" }

// Run looks up what an earlier run may have created before it creates anything: a crash after
// the create and before the engine's write runs the step again, and a lost answer looks like a
// failure although the ticket exists.
func (s OpenTicket) Run(ctx context.Context, op Op, log logrus.FieldLogger) (Op, time.Duration, error) {
	if op.Data.TicketID != "" {
		return op, 0, nil // done in an earlier run
	}
	key := "keb-" + op.InstanceID // deterministic: every attempt looks up the same key
	id, found, err := s.Tickets.FindTicket(ctx, key)
	if err == nil && !found {
		id, err = s.Tickets.CreateTicket(ctx, key, op.Data.SubaccountID)
	}
	if err != nil {
		wait, err := s.Systems.Retry(&op, "Tickets", "opening the ticket", err, s.PollInterval)
		return op, wait, err
	}
	op.Data.TicketID, op.LastError = id, ""
	log.WithField("ticket_id", id).Info("ticket opened")
	return op, 0, nil
}
