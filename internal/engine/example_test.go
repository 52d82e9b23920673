package engine_test

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/sirupsen/logrus"
)

type payload struct{ Done []string }

// named is a step that records its name in the payload.
type named string

func (n named) Name() string { return string(n) }

func (n named) Run(_ context.Context, op engine.Operation[payload], _ logrus.FieldLogger) (engine.Operation[payload], time.Duration, error) {
	op.Data.Done = append(op.Data.Done, string(n))
	return op, 0, nil
}

func printStages(p *engine.Process[payload]) {
	stages := p.Stages()
	names := make([]string, 0, len(stages))
	for name := range stages {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Println(name, stages[name])
	}
}

// A process declared by named stages, as provisioning is: the stages run in the order given,
// the steps of a stage in their order; a finished stage never runs again.
func ExampleStaged() {
	type def = engine.StepDef[payload]
	p, err := engine.Staged("example_provision", 24*time.Hour,
		engine.Stage[payload]{Name: "create_runtime", Steps: []def{
			def{Step: named("Initialization")}.AsLocal(),
			{Step: named("Create_Runtime"), RunTimeout: 30 * time.Second},
		}},
		engine.Stage[payload]{Name: "check_runtime", Timeout: time.Hour, Steps: []def{
			def{Step: named("Check_Runtime")}.AsReadOnly(),
		}},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Type(), p.Timeout())
	printStages(p)
	// Output:
	// example_provision 24h0m0s
	// check_runtime [Check_Runtime]
	// create_runtime [Initialization Create_Runtime]
}

// A process declared by weights, as deprovisioning and upgrades are: steps of equal weight form
// one stage named weight_<n>, lower weights first.
func ExampleWeighted() {
	type ws = engine.WeightedStep[payload]
	p, err := engine.Weighted("example_deprovision", 24*time.Hour,
		ws{Weight: 10, StepDef: engine.StepDef[payload]{Step: named("Remove_Runtime")}},
		ws{Weight: 1, StepDef: engine.StepDef[payload]{Step: named("Init")}},
		ws{Weight: 10, StepDef: engine.StepDef[payload]{Step: named("Deregister")}},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	printStages(p)

	_, err = engine.Weighted("broken", time.Hour, ws{Weight: 0, StepDef: engine.StepDef[payload]{Step: named("Zero")}})
	fmt.Println(err)
	// Output:
	// weight_1 [Init]
	// weight_10 [Remove_Runtime Deregister]
	// defining process broken: step Zero: weight must be >= 1, got 0
}
