package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"
)

// riverWhereTargetSet is River's tuned jobs/s (make bench-engine) on the 2-core machine where
// issue 16 set the target of 250 provisionings/s: the issue's own table gives both. The target
// is a rate on one machine, and sessions run on machines up to ~2.5x slower; River's rate,
// measured on the same machine and PostgreSQL server in the same invocation, scales it. River,
// like a provisioning, is a Go process writing small rows to PostgreSQL: across two machines
// 2.14x apart in River's rate, the e2e rate of one build moved 1.9-2.1x.
const riverWhereTargetSet = 32600.0

// reference is River's rate measured before and after the runs.
type reference struct {
	before, after float64
}

func (r reference) jobsPerSec() float64 { return (r.before + r.after) / 2 }

// scaledTarget is the target at this machine's speed.
func (r reference) scaledTarget() float64 { return target * r.jobsPerSec() / riverWhereTargetSet }

func (r reference) line() string {
	return fmt.Sprintf("e2e reference river_jobs_per_sec=%.0f (before=%.0f after=%.0f) river_where_target_set=%.0f machine_speed=%.2f target_scaled=%.0f",
		r.jobsPerSec(), r.before, r.after, riverWhereTargetSet, r.jobsPerSec()/riverWhereTargetSet, r.scaledTarget())
}

// scaled is PostgreSQL's median rate against the scaled target.
func (r reference) scaled(fs []figure) string {
	rate := median(sortedRates(fs))
	return fmt.Sprintf("e2e scaled driver=postgres rounds=%d provisionings_per_s=%.1f target_scaled=%.0f ratio_scaled=%.2f (target=%.0f ratio=%.2f)",
		len(fs), rate, r.scaledTarget(), rate/r.scaledTarget(), target, rate/target)
}

var riverRate = regexp.MustCompile(`(?m)^river driver=postgres .* jobs_per_sec=([0-9.]+)`)

// measureRiver runs River alone (tools/bench/river, its own module, in the checkout at repo)
// on the server of KEB_TEST_DATABASE_URL and returns its median jobs/s.
func measureRiver(repo string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", ".", "-river-only", "-rounds", "3")
	cmd.Dir = filepath.Join(repo, "tools", "bench", "river")
	cmd.Env = os.Environ()
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("measuring River's rate (%s): %w", cmd.Dir, err)
	}
	m := riverRate.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("measuring River's rate: no jobs_per_sec in %q", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}
