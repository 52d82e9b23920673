package storagetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

func testStaticAllocations(t *testing.T, e *env) {
	sa := e.s.StaticAllocations()
	hosts := []storage.StaticHost{{Host: "a", Slots: 2}, {Host: "b", Slots: 3}, {Host: "c", Slots: 3}}

	before := now()
	a1, err := sa.AllocateSlots(ctx, "pool", hosts, "rt1", 1)
	require.NoError(t, err)
	assert.Equal(t, storage.StaticAllocation{Pool: "pool", RuntimeID: "rt1", Host: "b", Slots: 1, CreatedAt: a1.CreatedAt}, a1,
		"the host with the most free slots, ties by name")
	assert.False(t, a1.CreatedAt.Before(before))
	assert.Equal(t, "UTC", a1.CreatedAt.Location().String())

	a2, err := sa.AllocateSlots(ctx, "pool", hosts, "rt2", 2)
	require.NoError(t, err)
	assert.Equal(t, "c", a2.Host, "c has 3 free, b 2, a 2")
	a3, err := sa.AllocateSlots(ctx, "pool", hosts, "rt3", 2)
	require.NoError(t, err)
	assert.Equal(t, "a", a3.Host, "a and b have 2 free: ties by name")

	used, err := sa.UsedSlots(ctx, "pool")
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"a": 2, "b": 1, "c": 2}, used)

	_, err = sa.AllocateSlots(ctx, "pool", hosts, "rt4", 3)
	assert.ErrorIs(t, err, storage.ErrNoCapacity, "no host has 3 free slots")

	got, err := sa.GetAllocation(ctx, "pool", "rt2")
	require.NoError(t, err)
	assert.Equal(t, a2, got)
	_, err = sa.GetAllocation(ctx, "pool", "missing")
	assert.ErrorIs(t, err, storage.ErrNotFound)
	_, err = sa.GetAllocation(ctx, "other-pool", "rt2")
	assert.ErrorIs(t, err, storage.ErrNotFound, "allocations belong to one pool")

	used, err = sa.UsedSlots(ctx, "other-pool")
	require.NoError(t, err)
	assert.Empty(t, used)
	other, err := sa.AllocateSlots(ctx, "other-pool", hosts, "rt2", 3)
	require.NoError(t, err, "pools do not share capacity")
	assert.Equal(t, "b", other.Host)

	for _, bad := range []struct {
		pool, rt string
		hosts    []storage.StaticHost
		slots    int
	}{
		{"", "rt9", hosts, 1},
		{"pool", "", hosts, 1},
		{"pool", "rt9", hosts, 0},
		{"pool", "rt9", nil, 1},
		{"pool", "rt9", []storage.StaticHost{{Host: "a", Slots: 1}, {Host: "a", Slots: 1}}, 1},
		{"pool", "rt9", []storage.StaticHost{{Slots: 1}}, 1},
	} {
		_, err := sa.AllocateSlots(ctx, bad.pool, bad.hosts, bad.rt, bad.slots)
		assert.Error(t, err, "%+v", bad)
		assert.NotErrorIs(t, err, storage.ErrNoCapacity, "%+v", bad)
	}
}

func testStaticAllocationIdempotent(t *testing.T, e *env) {
	sa := e.s.StaticAllocations()
	hosts := []storage.StaticHost{{Host: "h1", Slots: 2}, {Host: "h2", Slots: 2}}
	first, err := sa.AllocateSlots(ctx, "p", hosts, "rt", 1)
	require.NoError(t, err)
	for range 3 {
		again, err := sa.AllocateSlots(ctx, "p", hosts, "rt", 1)
		require.NoError(t, err)
		assert.Equal(t, first, again, "a runtime gets its allocation back")
	}
	again, err := sa.AllocateSlots(ctx, "p", []storage.StaticHost{{Host: "elsewhere", Slots: 1}}, "rt", 2)
	require.NoError(t, err)
	assert.Equal(t, first, again, "even when the request or the hosts changed")
	used, err := sa.UsedSlots(ctx, "p")
	require.NoError(t, err)
	assert.Equal(t, map[string]int{first.Host: 1}, used)

	// A full pool still gives an existing allocation back.
	_, err = sa.AllocateSlots(ctx, "p", hosts, "rt-2", 2)
	require.NoError(t, err)
	_, err = sa.AllocateSlots(ctx, "p", hosts, "rt-3", 1)
	require.NoError(t, err)
	_, err = sa.AllocateSlots(ctx, "p", hosts, "rt-4", 1)
	require.ErrorIs(t, err, storage.ErrNoCapacity)
	again, err = sa.AllocateSlots(ctx, "p", hosts, "rt", 1)
	require.NoError(t, err)
	assert.Equal(t, first, again)
}

func testStaticRelease(t *testing.T, e *env) {
	sa := e.s.StaticAllocations()
	hosts := []storage.StaticHost{{Host: "only", Slots: 1}}
	_, err := sa.AllocateSlots(ctx, "p", hosts, "rt1", 1)
	require.NoError(t, err)
	_, err = sa.AllocateSlots(ctx, "p", hosts, "rt2", 1)
	require.ErrorIs(t, err, storage.ErrNoCapacity)

	require.NoError(t, sa.ReleaseSlots(ctx, "p", "rt1"))
	_, err = sa.GetAllocation(ctx, "p", "rt1")
	assert.ErrorIs(t, err, storage.ErrNotFound)
	used, err := sa.UsedSlots(ctx, "p")
	require.NoError(t, err)
	assert.Empty(t, used)
	require.NoError(t, sa.ReleaseSlots(ctx, "p", "rt1"), "releasing twice is not an error")
	require.NoError(t, sa.ReleaseSlots(ctx, "p", "never"), "releasing a missing allocation is not an error")

	a, err := sa.AllocateSlots(ctx, "p", hosts, "rt2", 1)
	require.NoError(t, err, "released slots are free again")
	assert.Equal(t, "only", a.Host)
}

// testStaticAllocateConcurrent: 50 runtimes race for 30 slots; the pool lock lets exactly 30
// in and never oversubscribes a host.
func testStaticAllocateConcurrent(t *testing.T, e *env) {
	sa := e.s.StaticAllocations()
	hosts := []storage.StaticHost{{Host: "h1", Slots: 10}, {Host: "h2", Slots: 10}, {Host: "h3", Slots: 10}}
	const n = 50
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok, full int
		other    []error
		perHost  = map[string]int{}
	)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			a, err := sa.AllocateSlots(ctx, "race", hosts, fmt.Sprintf("rt-%02d", i), 1)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
				perHost[a.Host]++
			case errors.Is(err, storage.ErrNoCapacity):
				full++
			default:
				other = append(other, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Empty(t, other)
	assert.Equal(t, 30, ok)
	assert.Equal(t, 20, full)
	assert.Equal(t, map[string]int{"h1": 10, "h2": 10, "h3": 10}, perHost)
	used, err := sa.UsedSlots(ctx, "race")
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"h1": 10, "h2": 10, "h3": 10}, used, "no host over its 10 slots")
}
