package service_test

import (
	"context"
	"sync"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client/contracttest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/provisionertest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/service"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func withKey(name, key string) gqlschema.ProvisionRuntimeInput {
	in := contracttest.ProvisionInput(name)
	in.RuntimeInput.Labels = gqlschema.Labels{service.IdempotencyLabel: key}
	return in
}

func TestIdempotencyKeyReturnsTheFirstProvisioning(t *testing.T) {
	env := provisionertest.New(t, provisionertest.Options{})
	svc := env.Provisioner.Service
	ctx := context.Background()

	// Concurrent repeats (a broker step retried after a crash) all get one runtime.
	var wg sync.WaitGroup
	results := make([]*gqlschema.OperationStatus, 10)
	errs := make([]error, 10)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i], errs[i] = svc.ProvisionRuntime(ctx, "tenant-a", withKey("idem", "instance-1"))
		}(i)
	}
	wg.Wait()
	for i := range results {
		require.NoError(t, errs[i])
		assert.Equal(t, *results[0].ID, *results[i].ID)
		assert.Equal(t, *results[0].RuntimeID, *results[i].RuntimeID)
	}
	page, err := env.Store.Runtimes().ListRuntimes(ctx, storage.RuntimeFilter{IncludeDeleted: true})
	require.NoError(t, err)
	assert.Equal(t, 1, page.TotalCount)

	// Another key is another runtime, and keys are per tenant.
	other, err := svc.ProvisionRuntime(ctx, "tenant-a", withKey("idem2", "instance-2"))
	require.NoError(t, err)
	assert.NotEqual(t, *results[0].RuntimeID, *other.RuntimeID)
	b, err := svc.ProvisionRuntime(ctx, "tenant-b", withKey("idem3", "instance-1"))
	require.NoError(t, err, "keys are per tenant")
	assert.NotEqual(t, *results[0].RuntimeID, *b.RuntimeID)
}
