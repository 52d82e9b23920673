package simulated

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
)

var ctx = context.Background()

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// clock is a settable test clock.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func newBackend(t *testing.T, raw string) (*Backend, *clock) {
	t.Helper()
	spec, err := ParseSpec(json.RawMessage(raw))
	require.NoError(t, err)
	c := &clock{now: t0}
	b, err := New(spec, WithNow(c.Now))
	require.NoError(t, err)
	return b, c
}

func rtSpec(id, name string, req infrastructure.Request) infrastructure.Spec {
	return infrastructure.Spec{RuntimeID: id, Name: name, Request: req, RequestedAt: t0}
}

func TestCreateTimeline(t *testing.T) {
	b, c := newBackend(t, `{}`)
	spec := rtSpec("0123456789abcdef", "my-rt", infrastructure.RequestCreate)
	require.NoError(t, b.Create(ctx, spec))

	st, err := b.Status(ctx, spec)
	require.NoError(t, err)
	ready := t0.Add(3 * time.Second)
	assert.Equal(t, infrastructure.Status{Phase: infrastructure.PhaseInProgress, DoneAt: ready}, st, "no domain before domainDelay; done when creationDuration is over")

	c.now = t0.Add(time.Second)
	st, err = b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.Status{Domain: "my-rt.01234567.simulated.kyma.local", Phase: infrastructure.PhaseInProgress, DoneAt: ready}, st)

	c.now = t0.Add(3 * time.Second)
	st, err = b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.PhaseSucceeded, st.Phase)
	assert.Equal(t, "my-rt.01234567.simulated.kyma.local", st.Domain)
	assert.False(t, st.Hibernated)
	assert.True(t, st.DoneAt.IsZero(), "no done time once done")

	spec.Request = "" // empty means create
	st2, err := b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, st, st2)
}

func TestStatelessAcrossInstances(t *testing.T) {
	spec := rtSpec("rt-1", "a", infrastructure.RequestCreate)
	b1, c1 := newBackend(t, `{"creationDuration": "10s"}`)
	c1.now = t0.Add(11 * time.Second)
	s1, err := b1.Status(ctx, spec)
	require.NoError(t, err)
	b2, c2 := newBackend(t, `{"creationDuration": 10}`)
	c2.now = c1.now
	s2, err := b2.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, s1, s2, "a restarted backend (new instance) reports the same")
	assert.Equal(t, infrastructure.PhaseSucceeded, s1.Phase)
}

func TestFailRuntimeNames(t *testing.T) {
	b, c := newBackend(t, `{"failRuntimeNames": ["doomed"]}`)
	spec := rtSpec("rt-1", "doomed", infrastructure.RequestCreate)
	require.NoError(t, b.Create(ctx, spec))
	st, err := b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.PhaseInProgress, st.Phase, "fails only when creation would finish")
	c.now = t0.Add(3 * time.Second)
	st, err = b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.PhaseFailed, st.Phase)
	assert.Equal(t, FailureReason, st.Reason)

	st, err = b.Status(ctx, rtSpec("rt-2", "fine", infrastructure.RequestCreate))
	require.NoError(t, err)
	assert.Equal(t, infrastructure.PhaseSucceeded, st.Phase)
}

func TestFailureRateIsDeterministic(t *testing.T) {
	b, c := newBackend(t, `{"failureRate": 0.3, "creationDuration": "0s"}`)
	c.now = t0
	failed := 0
	const n = 1000
	for i := range n {
		spec := rtSpec(fmt.Sprintf("runtime-%d", i), "x", infrastructure.RequestCreate)
		first, err := b.Status(ctx, spec)
		require.NoError(t, err)
		again, err := b.Status(ctx, spec)
		require.NoError(t, err)
		require.Equal(t, first, again, "retries agree")
		if first.Phase == infrastructure.PhaseFailed {
			failed++
		}
	}
	assert.InDelta(t, 0.3*n, failed, 0.06*n)

	none, _ := newBackend(t, `{"failureRate": 0, "creationDuration": "0s"}`)
	all, _ := newBackend(t, `{"failureRate": 1, "creationDuration": "0s"}`)
	for i := range 50 {
		spec := rtSpec(fmt.Sprintf("runtime-%d", i), "x", infrastructure.RequestCreate)
		st, err := none.Status(ctx, spec)
		require.NoError(t, err)
		assert.Equal(t, infrastructure.PhaseSucceeded, st.Phase)
		st, err = all.Status(ctx, spec)
		require.NoError(t, err)
		assert.Equal(t, infrastructure.PhaseFailed, st.Phase)
	}
}

func TestUpdate(t *testing.T) {
	b, c := newBackend(t, `{"updateDuration": "2s"}`)
	spec := rtSpec("rt-1", "a", infrastructure.RequestUpdate)
	rev, err := b.Update(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, t0.UnixMilli(), rev)

	c.now = t0.Add(1999 * time.Millisecond)
	st, err := b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.PhaseInProgress, st.Phase)
	assert.Less(t, st.ObservedRevision, rev)
	assert.NotEmpty(t, st.Domain, "an existing cluster has its domain")

	c.now = t0.Add(2 * time.Second)
	st, err = b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.PhaseSucceeded, st.Phase)
	assert.Equal(t, rev, st.ObservedRevision)

	later := spec
	later.RequestedAt = t0.Add(time.Minute)
	rev2, err := b.Update(ctx, later)
	require.NoError(t, err)
	assert.Greater(t, rev2, rev, "a later update has a higher revision")
}

func TestHibernate(t *testing.T) {
	b, c := newBackend(t, `{"hibernationDuration": "5s"}`)
	spec := rtSpec("rt-1", "a", infrastructure.RequestHibernate)
	require.NoError(t, b.Hibernate(ctx, spec))
	st, err := b.Status(ctx, spec)
	require.NoError(t, err)
	assert.False(t, st.Hibernated)
	assert.Equal(t, infrastructure.PhaseInProgress, st.Phase)
	c.now = t0.Add(5 * time.Second)
	st, err = b.Status(ctx, spec)
	require.NoError(t, err)
	assert.True(t, st.Hibernated)
	assert.Equal(t, infrastructure.PhaseSucceeded, st.Phase)
}

func TestDelete(t *testing.T) {
	b, c := newBackend(t, `{"deletionDuration": "2s"}`)
	spec := rtSpec("rt-1", "a", infrastructure.RequestDelete)
	require.NoError(t, b.Delete(ctx, spec))
	gone, err := b.Deleted(ctx, spec)
	require.NoError(t, err)
	assert.False(t, gone)
	c.now = t0.Add(2 * time.Second)
	gone, err = b.Deleted(ctx, spec)
	require.NoError(t, err)
	assert.True(t, gone)
}

func TestKubeconfig(t *testing.T) {
	b, _ := newBackend(t, `{}`)
	kc, err := b.Kubeconfig(ctx, rtSpec("rt-42", "a", infrastructure.RequestCreate))
	require.NoError(t, err)
	cfg, err := clientcmd.Load([]byte(kc))
	require.NoError(t, err, "a valid kubeconfig")
	cur := cfg.Contexts[cfg.CurrentContext]
	require.NotNil(t, cur)
	assert.Equal(t, "simulated://rt-42?installationDuration=3s&agentConnectionDuration=2s", cfg.Clusters[cur.Cluster].Server,
		"the default installation and agent connection durations")

	b, _ = newBackend(t, `{"installationDuration": "0s", "agentConnectionDuration": 0.25}`)
	kc, err = b.Kubeconfig(ctx, rtSpec("rt-42", "a", infrastructure.RequestCreate))
	require.NoError(t, err)
	cfg, err = clientcmd.Load([]byte(kc))
	require.NoError(t, err)
	assert.Equal(t, "simulated://rt-42?installationDuration=0s&agentConnectionDuration=250ms", cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster].Server)
}

func TestNeedsRequestedAt(t *testing.T) {
	b, _ := newBackend(t, `{}`)
	spec := infrastructure.Spec{RuntimeID: "rt-1"}
	_, err := b.Status(ctx, spec)
	assert.ErrorContains(t, err, "RequestedAt")
	_, err = b.Update(ctx, spec)
	assert.ErrorContains(t, err, "RequestedAt")
	_, err = b.Deleted(ctx, spec)
	assert.ErrorContains(t, err, "RequestedAt")
	assert.Error(t, b.Create(ctx, infrastructure.Spec{}), "runtime ID is required")
}

func TestParseSpec(t *testing.T) {
	spec, err := ParseSpec(json.RawMessage(`{}`))
	require.NoError(t, err)
	assert.Equal(t, DefaultSpec(), spec)
	assert.Equal(t, time.Second, spec.DomainDelay)
	assert.Equal(t, 3*time.Second, spec.CreationDuration)
	assert.Equal(t, 3*time.Second, spec.InstallationDuration)
	assert.Equal(t, 2*time.Second, spec.AgentConnectionDuration)

	spec, err = ParseSpec(json.RawMessage(`{"domainDelay": "0s", "creationDuration": 1.5, "failRuntimeNames": ["x"]}`))
	require.NoError(t, err)
	assert.Equal(t, time.Duration(0), spec.DomainDelay)
	assert.Equal(t, 1500*time.Millisecond, spec.CreationDuration)
	assert.Equal(t, []string{"x"}, spec.FailRuntimeNames)

	for raw, want := range map[string]string{
		`{"creationDuration": "soon"}`:     "spec.creationDuration",
		`{"creationDurtion": "1s"}`:        "creationDurtion",
		`{"failureRate": "high"}`:          "spec.failureRate",
		`{"updateDuration": true}`:         "spec.updateDuration",
		`{"deletionDuration": "-1s"}`:      "spec.deletionDuration must not be negative",
		`{"installationDuration": "-1s"}`:  "spec.installationDuration must not be negative",
		`{"agentConnectionDuration": "x"}`: "spec.agentConnectionDuration",
		`{"failureRate": 1.5}`:             "spec.failureRate must be between 0 and 1",
		`{"failRuntimeNames": "doomed"}`:   "spec.failRuntimeNames",
	} {
		spec, err := ParseSpec(json.RawMessage(raw))
		if err == nil {
			_, err = New(spec)
		}
		assert.ErrorContains(t, err, want, raw)
	}
}
