package cli

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
)

// listOrchestrations is `kcp orchestrations`: a page of orchestrations.
func (a *app) listOrchestrations(cmd *cobra.Command, q url.Values) error {
	var out dto.StatusResponseList
	if err := a.client.getJSON(cmd.Context(), "GET", "/orchestrations", q, nil, &out); err != nil {
		return err
	}
	return a.print(out, func() table { return orchestrationsTable(out.Data) })
}

// showOrchestration is `kcp orchestrations ID`: one orchestration.
func (a *app) showOrchestration(cmd *cobra.Command, id string) error {
	var out dto.StatusResponse
	if err := a.client.getJSON(cmd.Context(), "GET", "/orchestrations/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return err
	}
	return a.print(out, func() table { return orchestrationFields(out) })
}

func orchestrationsTable(list []dto.StatusResponse) table {
	t := table{header: []string{"ORCHESTRATION ID", "TYPE", "STATE", "CREATED", "OK", "FAILED", "SKIPPED", "RUNNING", "PENDING", "CANCELED", "DESCRIPTION"}}
	for _, o := range list {
		s := o.OperationStats
		t.add(o.OrchestrationID, o.Type, o.State, ts(o.CreatedAt), strconv.Itoa(s[dto.Succeeded]), strconv.Itoa(s[dto.Failed]),
			strconv.Itoa(s[dto.Skipped]), strconv.Itoa(s[dto.InProgress]), strconv.Itoa(s[dto.Pending]+s[dto.Retrying]), strconv.Itoa(s[dto.Canceled]), oneLine(o.Description))
	}
	return t
}

func orchestrationFields(o dto.StatusResponse) table {
	p := o.Parameters
	version := ""
	switch {
	case p.Kyma != nil:
		version = "kyma " + p.Kyma.Version
	case p.Kubernetes != nil:
		version = strings.TrimSpace("kubernetes " + p.Kubernetes.KubernetesVersion + " " + p.Kubernetes.MachineImageVersion)
	}
	t := fields("orchestrationID", o.OrchestrationID, "type", o.Type, "state", o.State, "description", oneLine(o.Description),
		"createdAt", ts(o.CreatedAt), "updatedAt", ts(o.UpdatedAt), "upgrade", version, "targets", targetsString(p.Targets),
		"strategy", fmt.Sprintf("%s, schedule %s, %d workers", p.Strategy.Type, p.Strategy.Schedule, p.Strategy.Parallel.Workers),
		"dryRun", strconv.FormatBool(p.DryRun))
	for _, s := range dto.OperationStates {
		t.add("operations "+s, strconv.Itoa(o.OperationStats[s]))
	}
	return t
}

func targetsString(t dto.TargetSpec) string {
	one := func(list []dto.Target) string {
		var parts []string
		for _, tg := range list {
			var kv []string
			for _, f := range []struct{ k, v string }{{"target", tg.Target}, {"account", tg.GlobalAccount}, {"subaccount", tg.SubAccount},
				{"runtime-id", tg.RuntimeID}, {"instance-id", tg.InstanceID}, {"region", tg.Region}, {"plan", tg.PlanName}} {
				if f.v != "" {
					kv = append(kv, f.k+"="+f.v)
				}
			}
			parts = append(parts, strings.Join(kv, ","))
		}
		return strings.Join(parts, " ")
	}
	s := "include " + one(t.Include)
	if len(t.Exclude) > 0 {
		s += "; exclude " + one(t.Exclude)
	}
	return s
}
