package examplestep_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/docs/contributor/examplestep"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems/systemstest"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tickets is the system in memory: its tickets by key, and the answers it fails with first.
type tickets struct {
	mu       sync.Mutex
	byKey    map[string]string
	creates  int
	failures []error
	lost     bool // the next create succeeds but its answer is lost
}

func (t *tickets) fail() error {
	if len(t.failures) == 0 {
		return nil
	}
	err := t.failures[0]
	t.failures = t.failures[1:]
	return err
}

func (t *tickets) FindTicket(_ context.Context, key string) (string, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.fail(); err != nil {
		return "", false, err
	}
	id, ok := t.byKey[key]
	return id, ok, nil
}

func (t *tickets) CreateTicket(_ context.Context, key, _ string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.fail(); err != nil {
		return "", err
	}
	t.creates++
	id := "ticket-" + key
	t.byKey[key] = id
	if t.lost {
		t.lost = false
		return "", errors.New("connection reset")
	}
	return id, nil
}

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newStep(ts *tickets) examplestep.OpenTicket {
	return examplestep.OpenTicket{Tickets: ts, Systems: systems.Systems{RetryTime: time.Minute}, PollInterval: 5 * time.Second}
}

func newOp() examplestep.Op {
	return examplestep.Op{Operation: storage.Operation{InstanceID: "i-1"}, Data: examplestep.Data{SubaccountID: "sa-1"}}
}

func TestOpensOneTicket(t *testing.T) {
	ts := &tickets{byKey: map[string]string{}}
	op, wait, err := steptest.Run(context.Background(), newStep(ts), newOp(), now)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, "ticket-keb-i-1", op.Data.TicketID)

	_, _, err = steptest.Run(context.Background(), newStep(ts), op, now)
	require.NoError(t, err)
	assert.Equal(t, 1, ts.creates, "a second run creates nothing")
}

func TestALostAnswerFindsTheTicketOnTheRetry(t *testing.T) {
	ts := &tickets{byKey: map[string]string{}, lost: true}
	op, wait, err := steptest.Run(context.Background(), newStep(ts), newOp(), now)
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, wait)
	assert.Contains(t, op.LastError, "Tickets: opening the ticket: connection reset")

	op, wait, err = steptest.Run(context.Background(), newStep(ts), op, now.Add(wait))
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, "ticket-keb-i-1", op.Data.TicketID)
	assert.Empty(t, op.LastError)
	assert.Equal(t, 1, ts.creates)
}

func TestGivesUpAfterTheRetryTime(t *testing.T) {
	down := errors.New("HTTP 503")
	ts := &tickets{byKey: map[string]string{}, failures: []error{down, down}}
	op, wait, err := steptest.Run(context.Background(), newStep(ts), newOp(), now)
	require.NoError(t, err)
	require.Positive(t, wait)

	_, _, err = steptest.Run(context.Background(), newStep(ts), op, now.Add(2*time.Minute))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "gave up after 1m0s")
}

func TestAPermanentAnswerFailsAtOnce(t *testing.T) {
	ts := &tickets{byKey: map[string]string{}, failures: []error{clientkit.Permanent(errors.New("HTTP 400: subaccount unknown"))}}
	_, _, err := steptest.Run(context.Background(), newStep(ts), newOp(), now)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Tickets: opening the ticket: HTTP 400: subaccount unknown: step Open_Ticket failed")
}

// The step in a process, on the engine and a real (SQLite) store, as the broker runs it.
func TestRunsInAProcess(t *testing.T) {
	ids := steptest.IDs{Instance: "i-1", Runtime: "r-1", GlobalAccount: "ga-1", SubAccount: "sa-1"}
	store := steptest.OpenStore(t, ids)
	clock := systemstest.NewClock(now)
	ts := &tickets{byKey: map[string]string{}, failures: []error{errors.New("HTTP 502")}}
	p, err := engine.Staged("open_ticket", time.Hour, engine.Stage[examplestep.Data]{
		Name: "tickets", Steps: []engine.StepDef[examplestep.Data]{{Step: newStep(ts)}},
	})
	require.NoError(t, err)
	eng := steptest.Engine(t, store, clock, p)

	raw := steptest.StartOperation(t, store, "open_ticket", ids.Instance, examplestep.Data{SubaccountID: "sa-1"}, clock.Now())
	op := steptest.RunToEnd(t, eng, store, clock, raw.ID, 5*time.Second)
	require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
	assert.Equal(t, []string{"Open_Ticket:retrying", "Open_Ticket:succeeded"}, steptest.Trace(t, store, raw.ID))
	assert.Equal(t, 1, ts.creates)
}

// The guide quotes this package's step verbatim: change both together.
func TestTheGuideQuotesTheStep(t *testing.T) {
	src, err := os.ReadFile("examplestep.go")
	require.NoError(t, err)
	guide, err := os.ReadFile("../adding-a-step.md")
	require.NoError(t, err)
	code := string(src)
	code = code[strings.Index(code, "// Data is the process's payload"):]
	assert.Contains(t, string(guide), code, "docs/contributor/adding-a-step.md must quote examplestep.go from its Data type on")
}
