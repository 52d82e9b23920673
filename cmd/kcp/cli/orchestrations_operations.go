package cli

import (
	"fmt"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
)

// listOrchestrationOperations is `kcp orchestrations ID operations`: a page of its operations.
func (a *app) listOrchestrationOperations(cmd *cobra.Command, id string, q url.Values) error {
	var out dto.OperationResponseList
	if err := a.client.getJSON(cmd.Context(), "GET", "/orchestrations/"+url.PathEscape(id)+"/operations", q, nil, &out); err != nil {
		return err
	}
	return a.print(out, func() table {
		t := table{header: []string{"OPERATION ID", "INSTANCE ID", "RUNTIME ID", "ACCOUNT", "PLAN", "REGION", "STATE", "TRIES", "DESCRIPTION"}}
		for _, op := range out.Data {
			t.add(op.OperationID, op.InstanceID, op.RuntimeID, op.GlobalAccountID, op.ServicePlanName, op.Region, op.State, strconv.Itoa(op.Attempts), oneLine(op.Description))
		}
		return t
	})
}

// showOrchestrationOperation is `kcp orchestrations ID operations OPERATION_ID`: one operation
// with its steps and events.
func (a *app) showOrchestrationOperation(cmd *cobra.Command, id, operationID string) error {
	var out dto.OperationDetailResponse
	path := "/orchestrations/" + url.PathEscape(id) + "/operations/" + url.PathEscape(operationID)
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
