package observe

import (
	"context"
	"crypto/sha256"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"
)

// An operation runs in many step runs, on any replica, long after the request that created it
// ended: its spans form one trace of their own whose ID is the operation's ID (a UUID is 16
// bytes, as a trace ID), so that an operator finds it by the ID the broker returns, and the
// span that created it links to that trace.

// OperationTrace is the span context every step run of operation id is a child of: its trace
// ID is the operation's ID (or a hash of it when it is not a UUID).
func OperationTrace(id string) trace.SpanContext {
	var tid trace.TraceID
	if u, err := uuid.Parse(id); err == nil {
		tid = trace.TraceID(u)
	} else {
		sum := sha256.Sum256([]byte(id))
		copy(tid[:], sum[:16])
	}
	sum := sha256.Sum256([]byte("operation:" + id))
	var sid trace.SpanID
	copy(sid[:], sum[:8])
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

// InOperationTrace is ctx with operation id's trace as the parent of the spans started in it.
func InOperationTrace(ctx context.Context, id string) context.Context {
	return trace.ContextWithRemoteSpanContext(ctx, OperationTrace(id))
}

// LinkOperation links the span of ctx (the request or step that created operation id) to the
// operation's trace.
func LinkOperation(ctx context.Context, id string) {
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		span.AddLink(trace.Link{SpanContext: OperationTrace(id)})
	}
}
