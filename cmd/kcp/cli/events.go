package cli

import (
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/kyma-project/kyma-environment-broker/common/runtime"
)

func (a *app) eventsCmd() *cobra.Command {
	var instanceIDs, operationIDs []string
	cmd := &cobra.Command{
		Use:     "events",
		Short:   "Show the step events of instances or operations (GET /events)",
		Example: "  kcp events --instance-id 1234\n  kcp events --operation-id 5678 -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(instanceIDs) == 0 && len(operationIDs) == 0 {
				return usagef("--instance-id or --operation-id is required")
			}
			q := url.Values{}
			for _, v := range instanceIDs {
				q.Add("instance_ids", v)
			}
			for _, v := range operationIDs {
				q.Add("operation_ids", v)
			}
			var out []runtime.Event
			if err := a.client.getJSON(cmd.Context(), "GET", "/events", q, nil, &out); err != nil {
				return err
			}
			return a.print(out, func() table {
				t := table{header: []string{"TIME", "OPERATION ID", "STEP", "TYPE", "DURATION", "MESSAGE"}}
				for _, e := range out {
					t.add(ts(e.CreatedAt), e.OperationID, e.Step, e.Type, (time.Duration(e.DurationMS) * time.Millisecond).String(), oneLine(e.Message))
				}
				return t
			})
		},
	}
	cmd.Flags().StringSliceVarP(&instanceIDs, "instance-id", "i", nil, "instance ID (repeat or comma-separate)")
	cmd.Flags().StringSliceVar(&operationIDs, "operation-id", nil, "operation ID")
	return cmd
}
