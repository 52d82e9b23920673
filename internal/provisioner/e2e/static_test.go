package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStaticPoolNeverOversubscribes: 50 concurrent provisionings against a pool of 3 hosts x
// 10 slots: exactly 30 runtimes are provisioned, the other 20 fail for lack of capacity.
func TestStaticPoolNeverOversubscribes(t *testing.T) {
	e := setupWith(t, defaultConfig(t), func(_ string, kc []byte) string {
		host := func(i int) string {
			return fmt.Sprintf(`{"host": "https://host-%d.pool.test", "slots": 10, "domain": "host-%d.pool.test", "kubeconfig": %q}`, i, i, string(kc))
		}
		return fmt.Sprintf(`{"pool": {"type": "static", "spec": {"runtimes": [%s, %s, %s]}}}`, host(1), host(2), host(3))
	})
	ctx := context.Background()
	ids := make([]string, 50)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			in := input(fmt.Sprintf("pool-%d", i))
			in.KymaConfig = nil
			st, err := e.client.ProvisionRuntime(ctx, tenant, in)
			require.NoError(t, err)
			ids[i] = *st.ID
		}(i)
	}
	wg.Wait()
	succeeded, failed := 0, 0
	for _, id := range ids {
		st := waitDone(t, e, id)
		switch st.State {
		case gqlschema.OperationStateSucceeded:
			succeeded++
		case gqlschema.OperationStateFailed:
			failed++
			assert.Contains(t, st.LastError.ErrMessage, "no capacity")
		}
	}
	assert.Equal(t, 30, succeeded)
	assert.Equal(t, 20, failed)
}

func waitDone(t *testing.T, e *env, opID string) *gqlschema.OperationStatus {
	t.Helper()
	for i := 0; ; i++ {
		st, err := e.client.RuntimeOperationStatus(context.Background(), tenant, opID)
		require.NoError(t, err)
		if st.State == gqlschema.OperationStateSucceeded || st.State == gqlschema.OperationStateFailed {
			return st
		}
		require.Less(t, i, 1200, "operation %s did not finish", opID)
		sleep()
	}
}
