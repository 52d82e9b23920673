package cli

import (
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
)

// cancelCmd is `kcp orchestrations cancel ID`.
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
