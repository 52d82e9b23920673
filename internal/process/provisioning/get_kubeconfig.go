package provisioning

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
)

// GetKubeconfig reads the runtime's kubeconfig from the provisioner for the reconciler; it is kept
// in the operation's encrypted secrets (Kyma 2.x only).
type GetKubeconfig struct{ Deps }

func (GetKubeconfig) Name() string { return "Get_Kubeconfig" }

func (s GetKubeconfig) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	if op.Secrets[KubeconfigSecret] != "" {
		return op, 0, nil
	}
	kc, err := RuntimeKubeconfig(ctx, s.Provisioner, op.Data.Context.GlobalAccountID, op.Data.RuntimeID)
	if err != nil {
		return op.RetryOperation(fmt.Sprintf("provisioner: %v", err), s.PollInterval, s.Systems.RetryTime)
	}
	if op.Secrets == nil {
		op.Secrets = map[string]string{}
	}
	op.Secrets[KubeconfigSecret], op.LastError = kc, ""
	return op, 0, nil
}
