package operations

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// FreshKubeconfig returns the runtime's stored kubeconfig kc, or, when its backend hands out
// expiring kubeconfigs (infrastructure.KubeconfigRenewer: gardener's admin kubeconfigs) and kc
// is due at now, a new one from the backend, which it stores with the runtime first. Whoever
// uses or hands out a runtime's kubeconfig (the runtime steps, cleanup, runtimeStatus) goes
// through it, so a kubeconfig is never used past its renewal time.
func FreshKubeconfig(ctx context.Context, b infrastructure.Backend, runtimes storage.Runtimes, sp infrastructure.Spec, kc string, now time.Time) (string, bool, error) {
	r, ok := b.(infrastructure.KubeconfigRenewer)
	if !ok || kc == "" || !infrastructure.KubeconfigDue(kc, now) {
		return kc, false, nil
	}
	c, err := r.KubeconfigCredentials(ctx, sp)
	if err != nil {
		return kc, false, fmt.Errorf("renewing the kubeconfig of runtime %s: %w", sp.RuntimeID, err)
	}
	if err := runtimes.SetRuntimeFields(ctx, sp.RuntimeID, storage.RuntimeFields{Kubeconfig: &c.Kubeconfig}); err != nil {
		return kc, false, fmt.Errorf("storing the renewed kubeconfig of runtime %s: %w", sp.RuntimeID, err)
	}
	return c.Kubeconfig, true, nil
}
