package logging

import (
	"github.com/sirupsen/logrus"
	"go.opentelemetry.io/otel/trace"
)

// TraceHook is a logrus hook: a line logged with a context (Entry.WithContext) that carries a
// span gets its trace_id and span_id, so a line leads to its trace and back.
type TraceHook struct{}

// Levels implements logrus.Hook: every level.
func (TraceHook) Levels() []logrus.Level { return logrus.AllLevels }

// Fire implements logrus.Hook.
func (TraceHook) Fire(e *logrus.Entry) error {
	if e.Context == nil {
		return nil
	}
	sc := trace.SpanContextFromContext(e.Context)
	if !sc.IsValid() {
		return nil
	}
	data := make(logrus.Fields, len(e.Data)+2)
	for k, v := range e.Data {
		data[k] = v
	}
	data["trace_id"], data["span_id"] = sc.TraceID().String(), sc.SpanID().String()
	e.Data = data
	return nil
}
