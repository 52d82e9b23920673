package cli

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
)

// orchestrationsCmd is `kcp orchestrations`: without a sub-command it shows orchestrations by
// its arguments (list, one, its operations, one operation); cancel and retry are sub-commands.
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
				return a.listOrchestrations(cmd, q)
			case 1:
				return a.showOrchestration(cmd, args[0])
			case 2:
				return a.listOrchestrationOperations(cmd, args[0], q)
			default:
				return a.showOrchestrationOperation(cmd, args[0], args[2])
			}
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&states, "state", nil, "filter by state: "+strings.Join(dto.States, ", ")+
		" (operations: "+strings.Join(dto.OperationStates, ", ")+")")
	f.IntVar(&page, "page", 1, "page to show")
	f.IntVar(&pageSize, "page-size", 100, "entries per page (at most 1000)")
	cmd.AddCommand(a.cancelCmd(), a.retryCmd())
	return cmd
}
