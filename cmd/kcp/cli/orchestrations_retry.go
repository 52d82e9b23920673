package cli

import (
	"net/url"

	"github.com/spf13/cobra"

	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
)

// retryCmd is `kcp orchestrations retry ID [--operation-id ...]`.
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
