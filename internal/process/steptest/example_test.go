package steptest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/sirupsen/logrus"
)

// flaky fails until its third attempt, retrying every 10 s for at most a minute.
type flaky struct{}

func (flaky) Name() string { return "Flaky" }

func (flaky) Run(_ context.Context, op engine.Operation[int], _ logrus.FieldLogger) (engine.Operation[int], time.Duration, error) {
	if op.Progress.Steps["Flaky"].Attempts < 3 {
		return op.RetryOperation("the system answered 503", 10*time.Second, time.Minute)
	}
	op.Data++
	return op, 0, nil
}

// Run runs a step as the engine would, counting attempts from the step's recorded progress;
// Attempted sets that progress, to test the give-up at the end of a retry window.
func ExampleRun() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	op, wait, err := steptest.Run(context.Background(), flaky{}, engine.Operation[int]{}, start)
	fmt.Println(wait, err, op.LastError)

	op, wait, err = steptest.Run(context.Background(), flaky{}, op, start.Add(wait))
	fmt.Println(wait, err)
	op, wait, err = steptest.Run(context.Background(), flaky{}, op, start.Add(20*time.Second))
	fmt.Println(wait, err, op.Data)

	late := steptest.Attempted(engine.Operation[int]{}, "Flaky", start, 1)
	_, _, err = steptest.Run(context.Background(), flaky{}, late, start.Add(2*time.Minute))
	fmt.Println(err)
	// Output:
	// 10s <nil> the system answered 503
	// 10s <nil>
	// 0s <nil> 1
	// the system answered 503: step Flaky gave up after 1m0s
}
