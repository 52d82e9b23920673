package sandboxtest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
)

// Opener opens a stand-in on a store, as the process does when it starts.
type Opener[S sandbox.System] func(ctx context.Context, store durable.Store) (S, error)

// Open opens a stand-in on store, failing the test if it cannot.
func Open[S sandbox.System](t testing.TB, open Opener[S], store durable.Store) S {
	t.Helper()
	st, err := open(context.Background(), store)
	require.NoError(t, err, "opening the stand-in")
	return st
}

// Reopen opens a stand-in on store, as a process restarted after kill -9 does, and checks that its
// objects snapshot is want: everything the stand-in before the restart showed.
func Reopen[S sandbox.System](t testing.TB, open Opener[S], store durable.Store, want any) S {
	t.Helper()
	st := Open(t, open, store)
	require.Equal(t, want, st.Objects(), "the objects after a restart")
	return st
}

// RequireResetIsDurable resets st, whose state is in store, and checks that a stand-in opened on
// store afterwards is as empty as a new one.
func RequireResetIsDurable[S sandbox.System](t testing.TB, st S, open Opener[S], store durable.Store) {
	t.Helper()
	require.NoError(t, st.Reset(context.Background()))
	Reopen(t, open, store, Open(t, open, durable.NewMemoryStore()).Objects())
}
