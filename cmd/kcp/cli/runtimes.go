package cli

import (
	"fmt"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/kyma-project/kyma-environment-broker/common/runtime"
)

func (a *app) runtimesCmd() *cobra.Command {
	var (
		accounts, subaccounts, instanceIDs, runtimeIDs, regions, shoots, plans, states []string
		opDetail                                                                       string
		kymaConfig, clusterConfig, expired, all                                        bool
		page, pageSize                                                                 int
	)
	cmd := &cobra.Command{
		Use:     "runtimes",
		Aliases: []string{"rt"},
		Short:   "List runtimes (GET /runtimes) with every filter",
		Example: `  kcp runtimes --account GA1 --plan azure --state provisioned
  kcp runtimes --state upgrading -o json
  kcp runtimes --instance-id 1234 --op-detail all --kyma-config --cluster-config`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			for key, vals := range map[string][]string{"account": accounts, "subaccount": subaccounts, "instance_id": instanceIDs,
				"runtime_id": runtimeIDs, "region": regions, "shoot": shoots, "plan": plans, "state": states} {
				for _, v := range vals {
					q.Add(key, v)
				}
			}
			if opDetail != "" {
				if opDetail != "all" && opDetail != "last" {
					return usagef("--op-detail: must be all or last, got %q", opDetail)
				}
				q.Set("op_detail", opDetail)
			}
			for key, on := range map[string]bool{"kyma_config": kymaConfig, "cluster_config": clusterConfig, "expired": expired} {
				if on {
					q.Set(key, "true")
				}
			}
			var out runtime.Page
			var err error
			if out.Data, out.TotalCount, err = readPages[runtime.DTO](cmd.Context(), a.client, "/runtimes", q, page, pageSize, all); err != nil {
				return err
			}
			out.Count = len(out.Data)
			if out.Data == nil {
				out.Data = []runtime.DTO{}
			}
			return a.print(out, func() table {
				t := table{header: []string{"GLOBAL ACCOUNT", "SUBACCOUNT", "INSTANCE ID", "RUNTIME ID", "PLAN", "REGION", "STATE", "CREATED", "STEP", "REASON"}}
				busy := false
				for _, r := range out.Data {
					step, reason := stepAndReason(r.Status)
					busy = busy || step != "" || reason != ""
					t.add(r.GlobalAccountID, r.SubAccountID, r.InstanceID, r.RuntimeID, r.ServicePlanName, r.ProviderRegion, r.Status.State, ts(r.Status.CreatedAt), step, reason)
				}
				if !busy {
					// Nothing under way or failed: the two empty columns would only narrow the others.
					t.header = t.header[:8]
					for i := range t.rows {
						t.rows[i] = t.rows[i][:8]
					}
				}
				return t
			})
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&accounts, "account", "g", nil, "global account ID (repeat or comma-separate)")
	f.StringSliceVarP(&subaccounts, "subaccount", "s", nil, "subaccount ID")
	f.StringSliceVarP(&instanceIDs, "instance-id", "i", nil, "instance ID")
	f.StringSliceVarP(&runtimeIDs, "runtime-id", "r", nil, "runtime ID")
	f.StringSliceVarP(&regions, "region", "R", nil, "provider region")
	f.StringSliceVarP(&shoots, "shoot", "c", nil, "shoot name")
	f.StringSliceVarP(&plans, "plan", "p", nil, "plan name (azure, aws, gcp, trial, free, ...)")
	f.StringSliceVar(&states, "state", nil, "runtime state: provisioning, provisioned, failed, updating, upgrading, suspended, expired, deprovisioning, deprovisioned")
	f.StringVar(&opDetail, "op-detail", "", "operations shown: all or last")
	f.BoolVar(&kymaConfig, "kyma-config", false, "include the Kyma configuration")
	f.BoolVar(&clusterConfig, "cluster-config", false, "include the cluster configuration")
	f.BoolVar(&expired, "expired", false, "only expired runtimes")
	f.IntVar(&page, "page", 1, "page to show")
	f.IntVar(&pageSize, "page-size", 100, "runtimes per page (at most 1000)")
	f.BoolVar(&all, "all", false, "read every page from --page on")
	return cmd
}

// stepAndReason are what the runtime's newest operation is doing, when it is under way (its
// stage, step and the step's runs so far), and why it failed, when it did.
func stepAndReason(st runtime.Status) (step, reason string) {
	var newest *runtime.Operation
	for _, op := range []*runtime.Operation{st.Provisioning, st.Deprovisioning, st.Update, st.UpgradingKyma, st.UpgradingCluster, st.Suspension} {
		if op != nil && (newest == nil || op.CreatedAt.After(newest.CreatedAt)) {
			newest = op
		}
	}
	if newest == nil {
		return "", ""
	}
	if newest.CurrentStep != "" {
		step = newest.Stage + "/" + newest.CurrentStep
		if newest.Stage == "" {
			step = newest.CurrentStep
		}
		if newest.CurrentStepAttempts > 1 {
			step += fmt.Sprintf(" (run %d)", newest.CurrentStepAttempts)
		}
	}
	if newest.State == "failed" {
		reason = oneLine(newest.Description)
	}
	return step, reason
}
