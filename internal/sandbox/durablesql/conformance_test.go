package durablesql

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type rows = map[string]map[string][]byte

func testSandboxObjects(t *testing.T, e *env) {
	ctx := context.Background()
	so := e.open(t)
	got, err := so.Load(ctx, "director")
	require.NoError(t, err)
	assert.Empty(t, got)

	require.NoError(t, so.Write(ctx, "director", rows{
		"runtime": {"t/1": []byte(`{"id":"1","labels":{"a":"ü"}}`), "t/2": []byte(`{"id":"2"}`)},
		"calls":   {"registerRuntime": []byte("2")},
	}))
	require.NoError(t, so.Write(ctx, "ias", rows{"serviceProvider": {"x": []byte(`{}`)}}))
	require.NoError(t, so.Write(ctx, "director", rows{
		"runtime": {"t/2": nil, "t/3": []byte(`{"id":"3"}`), "never": nil},
		"calls":   {"registerRuntime": []byte("3")},
	}), "an update, a delete, an insert and the delete of a missing row")
	want := rows{
		"runtime": {"t/1": []byte(`{"id":"1","labels":{"a":"ü"}}`), "t/3": []byte(`{"id":"3"}`)},
		"calls":   {"registerRuntime": []byte("3")},
	}
	got, err = so.Load(ctx, "director")
	require.NoError(t, err)
	assert.Equal(t, want, got)
	one, err := so.Get(ctx, "director", "runtime", "t/3")
	require.NoError(t, err)
	assert.Equal(t, []byte(`{"id":"3"}`), one)
	one, err = so.Get(ctx, "director", "runtime", "t/2")
	require.NoError(t, err)
	assert.Nil(t, one, "a deleted row")
	kind, err := so.Kind(ctx, "director", "runtime")
	require.NoError(t, err)
	assert.Equal(t, want["runtime"], kind)
	require.NoError(t, so.Write(ctx, "director", rows{"pair": {"ü\x1fa": []byte("1"), "ü\x1fb": []byte("1"), "üx\x1fc": []byte("1"), "u\x1fd": []byte("1")}}))
	pairs, err := so.Prefix(ctx, "director", "pair", "ü\x1f")
	require.NoError(t, err)
	assert.Equal(t, map[string][]byte{"ü\x1fa": []byte("1"), "ü\x1fb": []byte("1")}, pairs)
	pairs, err = so.Prefix(ctx, "director", "pair", "ü") // ends in a non-ASCII byte: no key range
	require.NoError(t, err)
	assert.Equal(t, map[string][]byte{"ü\x1fa": []byte("1"), "ü\x1fb": []byte("1"), "üx\x1fc": []byte("1")}, pairs)
	pairs, err = so.Prefix(ctx, "director", "pair", "u")
	require.NoError(t, err)
	assert.Equal(t, map[string][]byte{"u\x1fd": []byte("1")}, pairs)
	require.NoError(t, so.Write(ctx, "director", rows{"pair": {"ü\x1fa": nil, "ü\x1fb": nil, "üx\x1fc": nil, "u\x1fd": nil}}))

	// the rows are in the database: another store on it sees them
	other := e.open(t)
	got, err = other.Load(ctx, "director")
	require.NoError(t, err)
	assert.Equal(t, want, got)

	require.NoError(t, so.Clear(ctx, "director"))
	got, err = so.Load(ctx, "director")
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = so.Load(ctx, "ias")
	require.NoError(t, err)
	assert.Equal(t, rows{"serviceProvider": {"x": []byte(`{}`)}}, got, "systems are separate")
}

// testSandboxObjectsConcurrent writes overlapping rows of one system from several goroutines, each
// in its own order, as stand-ins of several processes on one database could: no deadlock, no error.
func testSandboxObjectsConcurrent(t *testing.T, e *env) {
	ctx := context.Background()
	so := e.open(t)
	const writers, keys = 6, 30
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 5 {
				r := rows{"counter": {}}
				for k := range keys {
					key := fmt.Sprintf("k%02d", (k*(w+1)+round)%keys)
					r["counter"][key] = []byte(fmt.Sprint(w))
				}
				if err := so.Write(ctx, "sys", r); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	got, err := so.Load(ctx, "sys")
	require.NoError(t, err)
	assert.Len(t, got["counter"], keys)
}

// testSandboxObjectsSystemsTogether writes several systems' rows at once, as the stand-ins of
// one process do, with one writer whose rows the database may refuse (PostgreSQL refuses a NUL
// in text): every other write succeeds and is complete (PostgreSQL coalesces the systems'
// writes into one statement and must not fail them for another's row).
func testSandboxObjectsSystemsTogether(t *testing.T, e *env) {
	ctx := context.Background()
	so := e.open(t)
	const systems, rounds = 5, 40
	var wg sync.WaitGroup
	errs := make(chan error, systems*rounds)
	for sys := range systems {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range rounds {
				r := rows{"object": {fmt.Sprintf("o%02d", round): []byte(fmt.Sprint(round))}}
				if err := so.Write(ctx, fmt.Sprintf("sys%d", sys), r); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for round := range rounds {
			_ = so.Write(ctx, "hostile", rows{"object": {fmt.Sprintf("bad\x00%d", round): []byte("x\x00")}})
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for sys := range systems {
		got, err := so.Load(ctx, fmt.Sprintf("sys%d", sys))
		require.NoError(t, err)
		assert.Len(t, got["object"], rounds)
	}
}
