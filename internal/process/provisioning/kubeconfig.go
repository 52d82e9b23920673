package provisioning

import (
	"context"
	"errors"
	"fmt"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
)

// RuntimeKubeconfig reads a runtime's kubeconfig from the provisioner (provisioning and upgrade).
func RuntimeKubeconfig(ctx context.Context, p client.Client, tenant, runtimeID string) (string, error) {
	st, err := p.RuntimeStatus(ctx, tenant, runtimeID)
	if err != nil {
		return "", fmt.Errorf("reading the runtime's status: %w", err)
	}
	if st.RuntimeConfiguration == nil || st.RuntimeConfiguration.Kubeconfig == nil || *st.RuntimeConfiguration.Kubeconfig == "" {
		return "", errors.New("the runtime has no kubeconfig yet")
	}
	return *st.RuntimeConfiguration.Kubeconfig, nil
}
