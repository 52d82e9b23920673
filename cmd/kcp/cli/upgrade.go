package cli

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
)

type upgradeFlags struct {
	targets, excludes []string
	schedule          string
	workers           int
	dryRun, wait      bool
	waitTimeout       time.Duration
	pollInterval      time.Duration
}

func (a *app) upgradeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "upgrade",
		Short: "Upgrade Kyma or the clusters of the selected runtimes (an orchestration)",
	}
	var kyma, cluster upgradeFlags
	var version, k8sVersion, imageVersion string
	kymaCmd := &cobra.Command{
		Use:   "kyma",
		Short: "Upgrade Kyma on the selected runtimes (POST /upgrade/kyma)",
		Example: `  kcp upgrade kyma --version 2.21.0 -t all --parallel-workers 4 --wait
  kcp upgrade kyma --version 2.21.0 -t account=GA1 -t region=westeurope,plan=azure -e runtime-id=r1 --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if version == "" {
				return usagef("--version is required")
			}
			if err := dto.CheckVersion("--version", version); err != nil {
				return usagef("%v", err)
			}
			return a.upgrade(cmd.Context(), "/upgrade/kyma", kyma, func(p *dto.Parameters) { p.Kyma = &dto.KymaParameters{Version: version} })
		},
	}
	kymaCmd.Flags().StringVar(&version, "version", "", "Kyma version to install")
	clusterCmd := &cobra.Command{
		Use:     "cluster",
		Short:   "Upgrade the Kubernetes clusters of the selected runtimes (POST /upgrade/cluster)",
		Example: `  kcp upgrade cluster --kubernetes-version 1.32 -t plan=aws --schedule maintenancewindow`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if k8sVersion == "" && imageVersion == "" {
				return usagef("--kubernetes-version or --machine-image-version is required")
			}
			for _, f := range [][2]string{{"--kubernetes-version", k8sVersion}, {"--machine-image-version", imageVersion}} {
				if f[1] == "" {
					continue
				}
				if err := dto.CheckVersion(f[0], f[1]); err != nil {
					return usagef("%v", err)
				}
			}
			return a.upgrade(cmd.Context(), "/upgrade/cluster", cluster, func(p *dto.Parameters) {
				p.Kubernetes = &dto.KubernetesParameters{KubernetesVersion: k8sVersion, MachineImageVersion: imageVersion}
			})
		},
	}
	clusterCmd.Flags().StringVar(&k8sVersion, "kubernetes-version", "", "Kubernetes version")
	clusterCmd.Flags().StringVar(&imageVersion, "machine-image-version", "", "machine image version")
	for _, c := range []struct {
		cmd *cobra.Command
		f   *upgradeFlags
	}{{kymaCmd, &kyma}, {clusterCmd, &cluster}} {
		fl := c.cmd.Flags()
		fl.StringArrayVarP(&c.f.targets, "target", "t", nil, `runtimes to include: "all" or key=value[,key=value...] with keys account, subaccount, runtime-id, instance-id, region, plan (all must match; repeat for more targets)`)
		fl.StringArrayVarP(&c.f.excludes, "target-exclude", "e", nil, "runtimes to exclude, as --target")
		fl.StringVar(&c.f.schedule, "schedule", "immediate", `when: "immediate", "maintenancewindow" or an RFC 3339 time`)
		fl.IntVar(&c.f.workers, "parallel-workers", 1, "upgrades running at once")
		fl.BoolVar(&c.f.dryRun, "dry-run", false, "only list the runtimes that would be upgraded")
		fl.BoolVar(&c.f.wait, "wait", false, "wait for the end, showing progress")
		fl.DurationVar(&c.f.waitTimeout, "wait-timeout", 3*time.Hour, "how long --wait waits")
		fl.DurationVar(&c.f.pollInterval, "poll-interval", 2*time.Second, "how often --wait reads the progress")
		cmd.AddCommand(c.cmd)
	}
	return cmd
}

// parseTarget reads "all" or key=value[,key=value...].
func parseTarget(s string) (dto.Target, error) {
	var t dto.Target
	if s == dto.TargetAll {
		return dto.Target{Target: dto.TargetAll}, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || v == "" {
			return t, fmt.Errorf("%q: want all or key=value[,key=value...]", s)
		}
		switch strings.ToLower(k) {
		case "target":
			t.Target = v
		case "account", "globalaccount", "global-account":
			t.GlobalAccount = v
		case "subaccount":
			t.SubAccount = v
		case "runtime-id", "runtimeid":
			t.RuntimeID = v
		case "instance-id", "instanceid":
			t.InstanceID = v
		case "region":
			t.Region = v
		case "plan", "planname":
			t.PlanName = v
		default:
			return t, fmt.Errorf("%q: unknown key %q (account, subaccount, runtime-id, instance-id, region, plan)", s, k)
		}
	}
	return t, nil
}

func (a *app) upgrade(ctx context.Context, path string, f upgradeFlags, set func(*dto.Parameters)) error {
	if len(f.targets) == 0 {
		return usagef("--target is required (use --target all for every runtime)")
	}
	if f.workers < 1 {
		return usagef("--parallel-workers: must be at least 1, got %d", f.workers)
	}
	p := dto.Parameters{DryRun: f.dryRun, Strategy: dto.StrategySpec{Type: dto.StrategyParallel, Schedule: f.schedule, Parallel: dto.ParallelSpec{Workers: f.workers}}}
	switch {
	case strings.EqualFold(f.schedule, "maintenancewindow"):
		p.Strategy.Schedule = dto.ScheduleMaintenanceWindow
	case f.schedule != dto.ScheduleImmediate:
		if _, err := dto.ParseTime(f.schedule); err != nil {
			return usagef("--schedule: want immediate, maintenancewindow or an RFC 3339 time: %v", err)
		}
	}
	for _, s := range f.targets {
		t, err := parseTarget(s)
		if err != nil {
			return usagef("--target %v", err)
		}
		p.Targets.Include = append(p.Targets.Include, t)
	}
	for _, s := range f.excludes {
		t, err := parseTarget(s)
		if err != nil {
			return usagef("--target-exclude %v", err)
		}
		p.Targets.Exclude = append(p.Targets.Exclude, t)
	}
	set(&p)
	var created dto.UpgradeResponse
	if err := a.client.getJSON(ctx, "POST", path, nil, p, &created); err != nil {
		return err
	}
	if f.dryRun {
		return a.printDryRun(ctx, created.OrchestrationID)
	}
	if !f.wait {
		return a.print(created, func() table { return fields("orchestrationID", created.OrchestrationID) })
	}
	if a.output == "table" {
		fmt.Fprintf(a.io.Out, "orchestration %s created\n", created.OrchestrationID)
	}
	st, err := a.waitFor(ctx, created.OrchestrationID, f)
	if err != nil {
		return err
	}
	if err := a.print(st, func() table { return orchestrationFields(st) }); err != nil {
		return err
	}
	if st.State != dto.Succeeded {
		return fmt.Errorf("orchestration %s ended %s: %s", st.OrchestrationID, st.State, st.Description)
	}
	return nil
}

// waitFor polls the orchestration until it ends, drawing the progress bar (redrawn in place on
// a terminal, a line per change elsewhere) on the error stream so that -o json stays clean.
func (a *app) waitFor(ctx context.Context, id string, f upgradeFlags) (dto.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, f.waitTimeout)
	defer cancel()
	w := a.io.Err
	tty := false
	if file, ok := w.(*os.File); ok && term.IsTerminal(int(file.Fd())) {
		tty = true
	}
	last := ""
	for {
		var st dto.StatusResponse
		if err := a.client.getJSON(ctx, "GET", "/orchestrations/"+url.PathEscape(id), nil, nil, &st); err != nil {
			return st, err
		}
		line := progressBar(st, 30)
		if tty {
			fmt.Fprintf(w, "\r%s", line)
		} else if line != last {
			fmt.Fprintln(w, line)
		}
		last = line
		switch st.State {
		case dto.Succeeded, dto.Failed, dto.Canceled:
			if tty {
				fmt.Fprintln(w)
			}
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("waiting for orchestration %s: %w (it goes on; see kcp orchestrations %s)", id, ctx.Err(), id)
		case <-time.After(f.pollInterval):
		}
	}
}

// progressBar draws [###+++...] with succeeded (#), failed (!) and in progress (>) parts.
func progressBar(st dto.StatusResponse, width int) string {
	s := st.OperationStats
	total := 0
	for _, n := range s {
		total += n
	}
	done := s[dto.Succeeded] + s[dto.Failed] + s[dto.Skipped] + s[dto.Canceled]
	var b strings.Builder
	b.WriteByte('[')
	used := 0
	for _, part := range []struct {
		n  int
		ch string
	}{{s[dto.Succeeded], "#"}, {s[dto.Failed], "!"}, {s[dto.Skipped], "-"}, {s[dto.Canceled], "x"}, {s[dto.InProgress], ">"}} {
		if total == 0 {
			break
		}
		k := part.n * width / total
		b.WriteString(strings.Repeat(part.ch, k))
		used += k
	}
	b.WriteString(strings.Repeat(".", max(width-used, 0)))
	b.WriteByte(']')
	return fmt.Sprintf("%s %d/%d  succeeded %d  failed %d  in progress %d  pending %d  skipped %d  %s", b.String(), done, total,
		s[dto.Succeeded], s[dto.Failed], s[dto.InProgress], s[dto.Pending]+s[dto.Retrying], s[dto.Skipped], st.State)
}

// dryRunResult is what `kcp upgrade ... --dry-run` prints: the runtimes the upgrade would touch.
type dryRunResult struct {
	OrchestrationID string                  `json:"orchestrationID"`
	DryRun          bool                    `json:"dryRun"`
	Runtimes        []dto.OperationResponse `json:"runtimes"`
}

// printDryRun lists every runtime a dry-run orchestration selected (all pages of its
// operations), so that an operator sees what a real run would touch before starting it.
func (a *app) printDryRun(ctx context.Context, id string) error {
	ops, _, err := readPages[dto.OperationResponse](ctx, a.client, "/orchestrations/"+url.PathEscape(id)+"/operations", nil, 1, 1000, true)
	if err != nil {
		return fmt.Errorf("listing the runtimes of dry run %s: %w", id, err)
	}
	out := dryRunResult{OrchestrationID: id, DryRun: true, Runtimes: append([]dto.OperationResponse{}, ops...)}
	if a.output == "table" {
		fmt.Fprintf(a.io.Out, "orchestration %s (dry run): %d runtime(s) would be upgraded\n", id, len(out.Runtimes))
	}
	return a.print(out, func() table {
		t := table{header: []string{"INSTANCE ID", "RUNTIME ID", "ACCOUNT", "SUBACCOUNT", "PLAN", "REGION"}}
		for _, op := range out.Runtimes {
			t.add(op.InstanceID, op.RuntimeID, op.GlobalAccountID, op.SubAccountID, op.ServicePlanName, op.Region)
		}
		return t
	})
}
