package provisioning

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/director"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// CheckRuntime waits for the provisioner to finish the runtime, then asks the Director for the
// runtime's console, which becomes the instance's dashboard URL.
type CheckRuntime struct{ Deps }

func (CheckRuntime) Name() string { return "Check_Runtime" }

// requestedMemo keeps the provisioner's answer to Create_Runtime's request for the rest of its
// run (engine.Remember, engine.Recall): Check_Runtime, right after it, takes the just-started operation's status from
// it instead of reading it again. The provisioner's finish wakes the waiting operation (in
// process), or its poll reads it.
const requestedMemo = "provisioner_requested"

// awaitProvisioner waits for the provisioner's operation, with the status Create_Runtime got in
// this run when there is one.
func (s CheckRuntime) awaitProvisioner(ctx context.Context, op *Op, tenant string) (time.Duration, error) {
	if st, ok := engine.Recall[*gqlschema.OperationStatus](*op, requestedMemo); ok {
		return systems.AwaitProvisionerStatus(s.Provisioner, op, st, s.PollInterval)
	}
	return systems.AwaitProvisioner(ctx, s.Provisioner, op, tenant, op.Data.ProvisionerOperationID, s.PollInterval)
}

// dashboardMemo keeps the dashboard URL Check_Runtime stored on the instance for the later steps
// of its run (engine.Memo): AVS_Create_External_Eval_Step monitors it.
const dashboardMemo = "dashboard_url"

// consolePrefix is how the provisioner names a runtime's console: https://console.<domain>.
const consolePrefix = "https://console."

func (s CheckRuntime) Run(ctx context.Context, op Op, log logrus.FieldLogger) (Op, time.Duration, error) {
	tenant := op.Data.Context.GlobalAccountID
	if wait, err := s.awaitProvisioner(ctx, &op, tenant); wait > 0 || err != nil {
		return op, wait, err
	}
	if op.Data.ShootName == "" {
		// The configuration alone: the runtime's operations are not needed here (one read).
		rc, err := s.Provisioner.RuntimeConfiguration(ctx, tenant, op.Data.RuntimeID)
		if err != nil {
			op.LastError = fmt.Sprintf("reading the runtime's configuration: %v", err)
			return op, s.PollInterval, nil
		}
		if rc != nil && rc.ClusterConfig != nil && rc.ClusterConfig.Name != nil {
			op.Data.ShootName = *rc.ClusterConfig.Name
		}
		keepKubeconfig(s.Deps, &op, rc)
	}
	dashboard := fmt.Sprintf("%s/?kubeconfigID=%s", s.Defaults.DashboardURL, op.InstanceID)
	if s.Systems.Director != nil {
		console, err := s.Systems.Director.GetConsoleURL(ctx, tenant, op.Data.RuntimeID)
		switch {
		case director.IsNotFound(err):
			// The provisioner labels the runtime when its cluster has a domain; not there yet.
			return op.RetryOperation("Director: the runtime has no console URL", s.PollInterval, s.Systems.RetryTime)
		case err != nil:
			wait, err := s.Systems.Retry(&op, "Director", "reading the runtime's console URL", err, s.PollInterval)
			return op, wait, err
		}
		dashboard = console
		op.Data.ShootDomain = strings.TrimPrefix(console, consolePrefix)
	}
	fields := storage.InstanceFields{DashboardURL: &dashboard}
	if op.Data.ShootName != "" {
		// With the dashboard URL: the save of the data with the shoot name then finds the
		// instance up to date (a row write fewer).
		fields.ShootName = &op.Data.ShootName
	}
	if err := s.Instances.SetInstanceFields(ctx, op.InstanceID, fields); err != nil {
		op.LastError = fmt.Sprintf("storing the dashboard URL: %v", err)
		return op, s.PollInterval, nil
	}
	engine.Remember(op, dashboardMemo, dashboard)
	log.WithField("dashboard_url", dashboard).Info("runtime ready")
	op.LastError = ""
	return op, 0, nil
}

// keepKubeconfig keeps the kubeconfig of the runtime's status in the operation's secrets when
// Get_Kubeconfig runs next (the reconciler installs Kyma): it then finds it there instead of
// reading the same status again.
func keepKubeconfig(d Deps, op *Op, rc *gqlschema.RuntimeConfig) {
	if !d.ReconcilerInstalls(*op) || rc == nil || rc.Kubeconfig == nil || *rc.Kubeconfig == "" || op.Secrets[KubeconfigSecret] != "" {
		return
	}
	if op.Secrets == nil {
		op.Secrets = map[string]string{}
	}
	op.Secrets[KubeconfigSecret] = *rc.Kubeconfig
}
