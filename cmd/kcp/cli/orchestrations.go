package cli

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
)

func (a *app) orchestrationsCmd() *cobra.Command {
	var (
		states         []string
		page, pageSize int
	)
	cmd := &cobra.Command{
		Use:     "orchestrations [ID [operations [OPERATION_ID]]]",
		Aliases: []string{"orchestration", "orc"},
		Short:   "List orchestrations, show one, its operations, or one operation with its steps and events",
		Example: `  kcp orchestrations --state in\ progress
  kcp orchestrations 0c4a...
  kcp orchestrations 0c4a... operations --state failed
  kcp orchestrations 0c4a... operations 9f1b...
  kcp orchestrations cancel 0c4a...
  kcp orchestrations retry 0c4a... [--operation-id 9f1b...]`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 3 || (len(args) >= 2 && args[1] != "operations" && args[1] != "ops") {
				return usagef("usage: kcp orchestrations [ID [operations [OPERATION_ID]]]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{"page": {strconv.Itoa(page)}, "page_size": {strconv.Itoa(pageSize)}}
			for _, s := range states {
				q.Add("state", s)
			}
			switch len(args) {
			case 0:
				var out dto.StatusResponseList
				if err := a.client.getJSON(cmd.Context(), "GET", "/orchestrations", q, nil, &out); err != nil {
					return err
				}
				return a.print(out, func() table { return orchestrationsTable(out.Data) })
			case 1:
				var out dto.StatusResponse
				if err := a.client.getJSON(cmd.Context(), "GET", "/orchestrations/"+url.PathEscape(args[0]), nil, nil, &out); err != nil {
					return err
				}
				return a.print(out, func() table { return orchestrationFields(out) })
			case 2:
				var out dto.OperationResponseList
				if err := a.client.getJSON(cmd.Context(), "GET", "/orchestrations/"+url.PathEscape(args[0])+"/operations", q, nil, &out); err != nil {
					return err
				}
				return a.print(out, func() table {
					t := table{header: []string{"OPERATION ID", "INSTANCE ID", "RUNTIME ID", "ACCOUNT", "PLAN", "REGION", "STATE", "TRIES", "DESCRIPTION"}}
					for _, op := range out.Data {
						t.add(op.OperationID, op.InstanceID, op.RuntimeID, op.GlobalAccountID, op.ServicePlanName, op.Region, op.State, strconv.Itoa(op.Attempts), oneLine(op.Description))
					}
					return t
				})
			default:
				var out dto.OperationDetailResponse
				path := "/orchestrations/" + url.PathEscape(args[0]) + "/operations/" + url.PathEscape(args[2])
				if err := a.client.getJSON(cmd.Context(), "GET", path, nil, nil, &out); err != nil {
					return err
				}
				return a.print(out, func() table {
					t := fields("operationID", out.OperationID, "instanceID", out.InstanceID, "runtimeID", out.RuntimeID, "state", out.State,
						"description", oneLine(out.Description), "attempts", strconv.Itoa(out.Attempts), "stage", out.Stage, "lastError", oneLine(out.LastError))
					for _, s := range out.Steps {
						state := "running"
						switch {
						case s.Skipped:
							state = "skipped"
						case s.Done:
							state = "done"
						}
						t.add("step "+s.Name, fmt.Sprintf("%s after %d attempt(s) %s", state, s.Attempts, oneLine(s.LastError)))
					}
					for _, e := range out.Events {
						msg := e.Step + " " + e.Type
						if e.Message != "" {
							msg += ": " + e.Message
						}
						t.add("event "+ts(e.CreatedAt), oneLine(msg))
					}
					return t
				})
			}
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&states, "state", nil, "filter by state: "+strings.Join(dto.States, ", "))
	f.IntVar(&page, "page", 1, "page to show")
	f.IntVar(&pageSize, "page-size", 100, "entries per page (at most 1000)")
	cmd.AddCommand(a.cancelCmd(), a.retryCmd())
	return cmd
}

func orchestrationsTable(list []dto.StatusResponse) table {
	t := table{header: []string{"ORCHESTRATION ID", "TYPE", "STATE", "CREATED", "OK", "FAILED", "RUNNING", "PENDING", "CANCELED", "DESCRIPTION"}}
	for _, o := range list {
		s := o.OperationStats
		t.add(o.OrchestrationID, o.Type, o.State, ts(o.CreatedAt), strconv.Itoa(s[dto.Succeeded]), strconv.Itoa(s[dto.Failed]),
			strconv.Itoa(s[dto.InProgress]), strconv.Itoa(s[dto.Pending]+s[dto.Retrying]), strconv.Itoa(s[dto.Canceled]), oneLine(o.Description))
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
	for _, s := range dto.States {
		if s != dto.Canceling {
			t.add("operations "+s, strconv.Itoa(o.OperationStats[s]))
		}
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

func (a *app) cancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel an orchestration: operations not started are canceled, running ones finish",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out dto.CancelResponse
			if err := a.client.getJSON(cmd.Context(), "PUT", "/orchestrations/"+url.PathEscape(args[0])+"/cancel", nil, nil, &out); err != nil {
				return err
			}
			return a.print(out, func() table {
				return fields("orchestrationID", out.OrchestrationID, "state", out.State, "canceled", strconv.Itoa(out.Canceled))
			})
		},
	}
}

func (a *app) retryCmd() *cobra.Command {
	var operationIDs []string
	cmd := &cobra.Command{
		Use:   "retry ID",
		Short: "Retry an orchestration's failed operations (all, or those given with --operation-id)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out dto.RetryResponse
			if err := a.client.getJSON(cmd.Context(), "PUT", "/orchestrations/"+url.PathEscape(args[0])+"/retry", nil,
				dto.RetryRequest{OperationIDs: operationIDs}, &out); err != nil {
				return err
			}
			return a.print(out, func() table {
				t := fields("orchestrationID", out.OrchestrationID, "message", out.Message)
				for _, id := range out.RetriedOperations {
					t.add("new operation", id)
				}
				return t
			})
		},
	}
	cmd.Flags().StringSliceVar(&operationIDs, "operation-id", nil, "failed operation to retry (repeat or comma-separate; default every failed one)")
	return cmd
}
