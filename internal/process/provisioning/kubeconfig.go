package provisioning

import (
	"context"
	"errors"
	"fmt"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
)

// RuntimeKubeconfig reads a runtime's kubeconfig from the provisioner (provisioning and upgrade).
func RuntimeKubeconfig(ctx context.Context, p client.Client, tenant, runtimeID string) (string, error) {
	rc, err := p.RuntimeConfiguration(ctx, tenant, runtimeID)
	if err != nil {
		return "", fmt.Errorf("reading the runtime's configuration: %w", err)
	}
	if rc == nil || rc.Kubeconfig == nil || *rc.Kubeconfig == "" {
		return "", errors.New("the runtime has no kubeconfig yet")
	}
	return *rc.Kubeconfig, nil
}
