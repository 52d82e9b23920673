package operations

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// WaitForClusterCreation waits for the backend to finish the cluster and stores its
// kubeconfig (encrypted) and its allocation with the runtime. A backend with no cluster
// credentials to hand out (a static host without a kubeconfig) returns an empty kubeconfig:
// nothing is stored, and steps that need the cluster say so.
type WaitForClusterCreation struct{ Deps }

func (WaitForClusterCreation) Name() string { return "Wait_For_Cluster_Creation" }

func (s WaitForClusterCreation) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	b, err := s.backend(op)
	if err != nil {
		return op, 0, err
	}
	sp := spec(&op, requestCreate)
	st, err := b.Status(ctx, sp)
	if err != nil {
		return s.waitFor(op, fmt.Sprintf("reading cluster status: %v", err))
	}
	switch st.Phase {
	case infrastructure.PhaseFailed:
		return op, 0, fmt.Errorf("cluster creation failed: %s", st.Reason)
	case infrastructure.PhaseSucceeded:
	default:
		return s.waitUntil(op, "waiting for the cluster to be created", st)
	}
	kc, err := b.Kubeconfig(ctx, sp)
	if err != nil {
		return s.waitFor(op, fmt.Sprintf("reading the cluster's kubeconfig: %v", err))
	}
	var alloc []byte
	if st.Allocation != nil {
		if alloc, err = json.Marshal(st.Allocation); err != nil {
			return op, 0, fmt.Errorf("encoding the runtime's allocation: %w", err)
		}
		op.Data.Allocated = true
		op.Data.Namespace = st.Allocation.Namespace
	}
	if kc == "" && alloc == nil {
		return op, 0, nil // nothing to store
	}
	// The kubeconfig alone is one column of the runtime (no read of its other secrets); in a run
	// of the engine it rides on the operation's next save (Deps.Runtimes is
	// engine.DeferringRuntimes; the step is read-only: a run again after a crash reads it again).
	if alloc == nil {
		if err := s.Runtimes.SetRuntimeFields(ctx, op.Data.RuntimeID, storage.RuntimeFields{Kubeconfig: &kc}); err != nil {
			return s.waitFor(op, fmt.Sprintf("storing the kubeconfig: %v", err))
		}
		engine.Remember(op, kubeconfigMemo, kc)
		engine.Remember(op, namespaceMemo, op.Data.Namespace)
		return op, 0, nil
	}
	if err := s.updateRuntime(ctx, op.Data.RuntimeID, func(rt *storage.Runtime) error {
		if kc != "" {
			if rt.Secrets == nil {
				rt.Secrets = storage.Secrets{}
			}
			rt.Secrets[KubeconfigKey] = kc
		}
		if alloc != nil {
			rt.Allocation = alloc
		}
		return nil
	}); err != nil {
		return s.waitFor(op, fmt.Sprintf("storing the kubeconfig and allocation: %v", err))
	}
	if kc != "" {
		engine.Remember(op, kubeconfigMemo, kc)
		engine.Remember(op, namespaceMemo, op.Data.Namespace)
	}
	return op, 0, nil
}
