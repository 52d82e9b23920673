package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/sirupsen/logrus"
)

// Step is the seed's step contract with a context first: the context carries the step's run
// time limit and is cancelled when the engine shuts down or loses the operation's lease.
// A returned duration > 0 means "run me again after that long", an error fails the operation,
// otherwise the step is done and never runs again for this operation.
type Step[T any] interface {
	Name() string
	Run(ctx context.Context, op Operation[T], log logrus.FieldLogger) (Operation[T], time.Duration, error)
}

// StepDef is a step with its optional condition and limits.
type StepDef[T any] struct {
	Step Step[T]
	// Condition, when set and false, skips the step (recorded as skipped).
	Condition func(op Operation[T]) bool
	// Timeout bounds how long the step may keep asking to be retried, from its first attempt.
	Timeout time.Duration
	// RunTimeout bounds one Run call (its context deadline).
	RunTimeout time.Duration
	// Local declares that the step calls no external system, no other process (the
	// provisioner included) and no Kubernetes API, and writes nothing but its operation: it
	// only computes from the operation, the configuration and reads of the broker's own
	// database, so running it again is harmless. The engine runs it without a
	// durable write of its own; its outcome rides on the next write (after the next non-local
	// step, a wait or the end), and a crash before that write runs it again. Leave it false
	// when in doubt: a non-local step's outcome is written before any later step runs.
	Local bool
	// ReadOnly declares that the step calls out only to read (a status, a kubeconfig): it
	// creates, changes and deletes nothing outside the broker's database, and what it writes
	// there (its operation, fields of its instance or runtime) a run again writes the same. Like
	// a local step's, its success has no durable write of its own: there is no side effect
	// whose ID must be durable before the next step, and a crash before the next write reads
	// again. A wait is written as any wait is. Steps that set anything in an external system
	// (labels included) are not read-only.
	ReadOnly bool
	// Idempotent declares that the step's external calls only set what a run again sets the
	// same (a label, a tag, metadata by key, an object under a name the step chooses, whose
	// "already exists" it takes as done), and that it keeps no ID an external system chose: a
	// run again after a crash repeats the same effect and outcome, and nothing it created can be
	// lost or made twice. Like a read-only step's, its success has no durable write of its own.
	// A step that creates something the external system names (an evaluation, an instance, a
	// registration) is not idempotent in this sense even when it looks up first: its ID is
	// written before the next step runs.
	Idempotent bool
}

// AsLocal, AsReadOnly and AsIdempotent return the step declared so (the fields' rules): the
// processes declare their steps where they list them.
func (sd StepDef[T]) AsLocal() StepDef[T]      { sd.Local = true; return sd }
func (sd StepDef[T]) AsReadOnly() StepDef[T]   { sd.ReadOnly = true; return sd }
func (sd StepDef[T]) AsIdempotent() StepDef[T] { sd.Idempotent = true; return sd }

// noWriteOfItsOwn: the step's success may ride on the next write (StepDef.Local, ReadOnly,
// Idempotent).
func (sd StepDef[T]) noWriteOfItsOwn() bool { return sd.Local || sd.ReadOnly || sd.Idempotent }

// Stage is a named group of steps; a finished stage is never run again.
type Stage[T any] struct {
	Name  string
	Steps []StepDef[T]
	// Timeout bounds the stage from its first start (survives restarts).
	Timeout time.Duration
}

// WeightedStep places a step by weight: steps of equal weight form one stage, lower first.
type WeightedStep[T any] struct {
	Weight int
	StepDef[T]
}

// Process is the definition of one operation type: its ordered stages and its deadline.
type Process[T any] struct {
	opType  string
	timeout time.Duration
	stages  []Stage[T]
	// steps counts the steps of all stages.
	steps int
}

// Staged defines a process by named stages (provisioning).
func Staged[T any](opType string, timeout time.Duration, stages ...Stage[T]) (*Process[T], error) {
	p := &Process[T]{opType: opType, timeout: timeout, stages: stages}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("defining process %s: %w", opType, err)
	}
	return p, nil
}

// Weighted defines a process by step weights (deprovisioning, upgrade). Stages are named
// "weight_<n>"; the order of steps of equal weight is their order in the list.
func Weighted[T any](opType string, timeout time.Duration, steps ...WeightedStep[T]) (*Process[T], error) {
	sorted := append([]WeightedStep[T](nil), steps...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Weight < sorted[j].Weight })
	var stages []Stage[T]
	for _, s := range sorted {
		if s.Weight < 1 {
			name := "<nil>"
			if s.Step != nil {
				name = s.Step.Name()
			}
			return nil, fmt.Errorf("defining process %s: step %s: weight must be >= 1, got %d", opType, name, s.Weight)
		}
		stageName := fmt.Sprintf("weight_%d", s.Weight)
		if len(stages) == 0 || stages[len(stages)-1].Name != stageName {
			stages = append(stages, Stage[T]{Name: stageName})
		}
		last := &stages[len(stages)-1]
		last.Steps = append(last.Steps, s.StepDef)
	}
	return Staged(opType, timeout, stages...)
}

// Type is the operation type this process runs.
func (p *Process[T]) Type() string { return p.opType }

// Timeout is the operation deadline measured from creation.
func (p *Process[T]) Timeout() time.Duration { return p.timeout }

// Stages returns the stage and step names in order (for docs and the operator API).
func (p *Process[T]) Stages() map[string][]string {
	out := make(map[string][]string, len(p.stages))
	for _, st := range p.stages {
		for _, sd := range st.Steps {
			out[st.Name] = append(out[st.Name], sd.Step.Name())
		}
	}
	return out
}

func (p *Process[T]) validate() error {
	if p.opType == "" {
		return errors.New("operation type is empty")
	}
	if p.timeout <= 0 {
		return fmt.Errorf("timeout must be positive, got %s", p.timeout)
	}
	if len(p.stages) == 0 {
		return errors.New("no stages")
	}
	stages := map[string]bool{}
	steps := map[string]bool{}
	for i, st := range p.stages {
		if st.Name == "" {
			return fmt.Errorf("stage %d has no name", i)
		}
		if stages[st.Name] {
			return fmt.Errorf("stage %s defined twice", st.Name)
		}
		stages[st.Name] = true
		if len(st.Steps) == 0 {
			return fmt.Errorf("stage %s has no steps", st.Name)
		}
		for _, sd := range st.Steps {
			if sd.Step == nil {
				return fmt.Errorf("stage %s has a nil step", st.Name)
			}
			// Progress is keyed by step name, so names must be unique within a process.
			if steps[sd.Step.Name()] {
				return fmt.Errorf("step %s defined twice", sd.Step.Name())
			}
			steps[sd.Step.Name()] = true
		}
	}
	p.steps = len(steps)
	return nil
}
