package upgrade

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/sirupsen/logrus"
)

// GetKubeconfig reads the runtime's kubeconfig for the reconciler (Kyma 2.x only).
type GetKubeconfig struct{ Deps }

func (GetKubeconfig) Name() string { return "Get_Kubeconfig" }

func (s GetKubeconfig) Run(ctx context.Context, op KymaOp, _ logrus.FieldLogger) (KymaOp, time.Duration, error) {
	if op.Secrets[provisioning.KubeconfigSecret] != "" {
		return op, 0, nil
	}
	kc, err := provisioning.RuntimeKubeconfig(ctx, s.Provisioner, op.Data.GlobalAccountID, op.Data.RuntimeID)
	if err != nil {
		return op.RetryOperation(fmt.Sprintf("provisioner: %v", err), s.PollInterval, s.Systems.RetryTime)
	}
	if op.Secrets == nil {
		op.Secrets = map[string]string{}
	}
	op.Secrets[provisioning.KubeconfigSecret], op.LastError = kc, ""
	return op, 0, nil
}
