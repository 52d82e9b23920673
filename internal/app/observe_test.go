package app_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/observe"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// syncBuffer is the output a process writes while the test reads it.
type syncBuffer = testenv.SyncBuffer

// One provisioning, traced with an in-process exporter: the OSB request's server span links to
// the operation's trace (whose ID is the operation's ID); every step run is a span of that
// trace; the external systems' calls are client spans under the steps that made them, with the
// trace context sent along; the provisioner's operation, created by a broker step, is linked
// from it and traced in turn; and the step's log lines carry the trace ID.
func TestProvisioningTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})

	logs := &syncBuffer{}
	b := bt.Start(t, bt.Options{LogOutput: logs})
	instanceID, ga := uuid.NewString(), uuid.NewString()
	opID := b.Provision(instanceID, "traced", ga)
	b.WaitSucceeded(instanceID, opID)

	opTrace := observe.OperationTrace(opID)
	require.Equal(t, strings.ReplaceAll(opID, "-", ""), opTrace.TraceID().String(), "the operation's trace ID is its ID")

	spans := rec.Ended()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
	}

	// The OSB request: a server span named by its route, linked to the operation's trace.
	var put sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanKind() == trace.SpanKindServer && strings.HasPrefix(s.Name(), "PUT ") && strings.HasSuffix(s.Name(), "/v2/service_instances/{instance_id}") {
			put = s
		}
	}
	require.NotNil(t, put, "a server span for the provisioning request, named by its route: %v", names(spans))
	assert.True(t, linksTo(put, opTrace.TraceID()), "the request links to the operation's trace")

	// The broker's steps: spans of the operation's trace, children of its root.
	steps := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		if s.SpanContext().TraceID() == opTrace.TraceID() && strings.HasPrefix(s.Name(), "step ") {
			assert.Equal(t, opTrace.SpanID(), s.Parent().SpanID(), "step %s is a child of the operation", s.Name())
			steps[s.Name()] = s
		}
	}
	require.GreaterOrEqual(t, len(steps), 3, "the provisioning's steps are traced: %v", names(spans))

	// External calls: client spans named by their system, children of a step of the operation.
	systems := map[string]bool{}
	for _, s := range spans {
		if s.SpanKind() != trace.SpanKindClient || s.SpanContext().TraceID() != opTrace.TraceID() {
			continue
		}
		parent, ok := byID[s.Parent().SpanID()]
		require.True(t, ok, "client span %s has a recorded parent", s.Name())
		assert.True(t, strings.HasPrefix(parent.Name(), "step "), "client span %s is under a step, not %s", s.Name(), parent.Name())
		for _, a := range s.Attributes() {
			if a.Key == "keb.system" {
				systems[a.Value.AsString()] = true
			}
		}
	}
	assert.NotEmpty(t, systems, "the steps' calls to the external systems are traced")

	// The provisioner's operation: created by a broker step, which links to its trace, and run
	// in steps of its own.
	var provTrace trace.TraceID
	for _, s := range steps {
		for _, l := range s.Links() {
			if l.SpanContext.TraceID() != opTrace.TraceID() {
				provTrace = l.SpanContext.TraceID()
			}
		}
	}
	require.True(t, provTrace.IsValid(), "a broker step links to the provisioner's operation")
	provSteps := 0
	for _, s := range spans {
		if s.SpanContext().TraceID() == provTrace && strings.HasPrefix(s.Name(), "step ") {
			provSteps++
		}
	}
	assert.Positive(t, provSteps, "the provisioner's operation is traced")

	// Log lines of the operation's steps carry its trace ID.
	traced := 0
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil || line["operation_id"] != opID {
			continue
		}
		if line["trace_id"] == opTrace.TraceID().String() {
			traced++
		}
	}
	assert.Positive(t, traced, "the operation's log lines carry its trace ID")
}

func linksTo(s sdktrace.ReadOnlySpan, id trace.TraceID) bool {
	for _, l := range s.Links() {
		if l.SpanContext.TraceID() == id {
			return true
		}
	}
	return false
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

var uuidPattern = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)

// After a provisioning, /metrics carries the HTTP request metrics by route template, the
// build and the operations by type and state, and no label value names an ID: not the
// instance's, operation's, runtime's, global account's or subaccount's, nor any UUID.
func TestMetricsLabelsCarryNoID(t *testing.T) {
	b := bt.Start(t, bt.Options{})
	instanceID, ga := uuid.NewString(), uuid.NewString()
	opID := b.Provision(instanceID, "counted", ga)
	b.WaitSucceeded(instanceID, opID)
	b.Get("/runtimes")
	ids := []string{instanceID, opID, ga, "sub-" + ga}
	for _, op := range b.Operations(instanceID) {
		ids = append(ids, op.ID)
	}
	if inst, err := b.Store.Instances().GetInstance(t.Context(), instanceID); err == nil && inst.RuntimeID != "" {
		ids = append(ids, inst.RuntimeID)
	}

	resp, err := http.Get(b.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	require.NoError(t, err)

	for name, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				v := l.GetValue()
				assert.False(t, uuidPattern.MatchString(v), "%s{%s=%q} carries an ID", name, l.GetName(), v)
				for _, id := range ids {
					assert.NotContains(t, v, id, "%s{%s=%q} carries an ID", name, l.GetName(), v)
				}
			}
		}
	}
	for _, want := range []string{"keb_http_requests_total", "keb_http_request_duration_seconds", "keb_build_info", "keb_operations"} {
		assert.Contains(t, families, want)
	}
	routes := map[string]bool{}
	for _, m := range families["keb_http_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "route" {
				routes[l.GetValue()] = true
			}
		}
	}
	provisioning := false
	for r := range routes {
		provisioning = provisioning || strings.HasSuffix(r, "/v2/service_instances/{instance_id}")
	}
	assert.True(t, provisioning, "the provisioning by its route template: %v", routes)
	assert.True(t, routes["/v2/service_instances/{instance_id}/last_operation"], "the polls by their route template: %v", routes)
}
