package durability

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/sirupsen/logrus"
)

// The test binary doubles as the worker process: with KEB_DURABILITY_WORKER set, TestMain runs
// workerMain instead of the tests, so the tests can start, kill -9 and restart real processes.
const (
	envWorker    = "KEB_DURABILITY_WORKER"
	envDB        = "KEB_DURABILITY_DB"
	envStepSleep = "KEB_DURABILITY_STEP_SLEEP"
	envWorkers   = "KEB_DURABILITY_WORKERS"
	envLease     = "KEB_DURABILITY_LEASE"
	// envAddr, when set, is the address the worker listens on; its engine then takes the
	// default owner derived from it (as the broker does) instead of a name of its own.
	envAddr     = "KEB_DURABILITY_ADDR"
	opType      = "durability"
	stepsPerOp  = 5
	waitingStep = "step_3"
)

type payload struct {
	Steps []string `json:"steps"`
}

// effectStep records its side effect under the idempotency key (operation, step) the way a
// step calls an external system: check for a stored result first, then act. Every run is
// also recorded with its time interval, so overlapping runs of one operation are visible.
type effectStep struct {
	name    string
	replica string
	db      *sql.DB
	sleep   time.Duration
}

func (s effectStep) Name() string { return s.name }

func (s effectStep) Run(ctx context.Context, op engine.Operation[payload], _ logrus.FieldLogger) (engine.Operation[payload], time.Duration, error) {
	var started time.Time
	if err := s.db.QueryRowContext(ctx, `SELECT clock_timestamp()`).Scan(&started); err != nil {
		return op, time.Second, nil
	}
	// step_3 waits once on its first attempt, so every operation is released mid-process and
	// claimed again, possibly by another replica.
	if s.name == waitingStep && op.Progress.Steps[s.name].Attempts == 1 {
		if err := s.recordRun(ctx, op.ID, started); err != nil {
			return op, 0, err
		}
		return op, 5 * time.Millisecond, nil
	}
	var exists bool
	if err := s.db.QueryRowContext(ctx, `SELECT EXISTS(SELECT 1 FROM effects WHERE operation_id=$1 AND step=$2)`, op.ID, s.name).Scan(&exists); err != nil {
		return op, time.Second, nil
	}
	if exists {
		// The effect happened but the engine had not recorded the step as done: a replay.
		if _, err := s.db.ExecContext(ctx, `INSERT INTO replays(operation_id, step, replica) VALUES ($1,$2,$3)`, op.ID, s.name, s.replica); err != nil {
			return op, 0, fmt.Errorf("recording replay: %w", err)
		}
	} else {
		time.Sleep(s.sleep)
		// A plain insert: if two runs of this step ever overlapped, one fails on the key and
		// so does its operation.
		if _, err := s.db.ExecContext(ctx, `INSERT INTO effects(operation_id, step, replica) VALUES ($1,$2,$3)`, op.ID, s.name, s.replica); err != nil {
			return op, 0, fmt.Errorf("recording effect %s/%s: %w", op.ID, s.name, err)
		}
	}
	if err := s.recordRun(ctx, op.ID, started); err != nil {
		return op, 0, err
	}
	op.Data.Steps = append(op.Data.Steps, s.name)
	return op, 0, nil
}

func (s effectStep) recordRun(ctx context.Context, opID string, started time.Time) error {
	if _, err := s.db.ExecContext(ctx, `INSERT INTO runs(operation_id, step, replica, started_at, finished_at) VALUES ($1,$2,$3,$4,clock_timestamp())`,
		opID, s.name, s.replica, started); err != nil {
		return fmt.Errorf("recording run: %w", err)
	}
	return nil
}

func definition(db *sql.DB, replica string, sleep time.Duration) (*engine.Process[payload], error) {
	steps := make([]engine.WeightedStep[payload], 0, stepsPerOp)
	for i := 1; i <= stepsPerOp; i++ {
		// Weights 1,1,2,3,3: stages of one and of two steps.
		w := []int{1, 1, 2, 3, 3}[i-1]
		steps = append(steps, engine.WeightedStep[payload]{Weight: w, StepDef: engine.StepDef[payload]{
			Step: effectStep{name: fmt.Sprintf("step_%d", i), replica: replica, db: db, sleep: sleep},
		}})
		// KEB_DURABILITY_BLOCK holds every operation that reaches the named step there (after
		// its effect, before the engine hears of it), so a kill lands on work in flight.
		if name := fmt.Sprintf("step_%d", i); os.Getenv(envBlock) == name {
			steps[i-1].Step = blockingStep{effectStep{name: name, replica: replica, db: db, sleep: sleep}}
		}
	}
	return engine.Weighted(opType, time.Hour, steps...)
}

func workerMain() int {
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	replica := os.Getenv(envWorker)
	sleep, _ := time.ParseDuration(os.Getenv(envStepSleep))
	lease, _ := time.ParseDuration(os.Getenv(envLease))
	workers, _ := strconv.Atoi(os.Getenv(envWorkers))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	store, err := openStore(ctx, os.Getenv(envDB), log)
	if err != nil {
		log.WithError(err).Error("opening store")
		return 1
	}
	defer store.Close()
	db, err := sql.Open("postgres", os.Getenv(envDB))
	if err != nil {
		log.WithError(err).Error("opening database")
		return 1
	}
	defer db.Close()
	def, err := definition(db, replica, sleep)
	if os.Getenv(envProcess) == "mixed" {
		def, err = mixedDefinition(db, replica)
	}
	if err != nil {
		log.WithError(err).Error("defining process")
		return 1
	}
	cfg := engine.Config{Workers: workers, LeaseDuration: lease, PollInterval: 100 * time.Millisecond, Owner: fmt.Sprintf("%s-%d", replica, os.Getpid())}
	if addr := os.Getenv(envAddr); addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			log.WithError(err).Error("listening")
			return 1
		}
		defer ln.Close()
		cfg.Owner, cfg.Address = "", ln.Addr().String()
	}
	eng, err := engine.New(store, cfg, log)
	if err != nil {
		log.WithError(err).Error("creating engine")
		return 1
	}
	if err := eng.Register(def); err != nil {
		log.WithError(err).Error("registering process")
		return 1
	}
	if err := eng.Run(ctx); err != nil {
		log.WithError(err).Error("engine")
		return 1
	}
	return 0
}
