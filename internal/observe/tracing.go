package observe

import (
	"context"
	"fmt"
	"strings"

	"github.com/sirupsen/logrus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TracingEnabled tells whether the standard OTEL_* variables ask for traces: an OTLP endpoint
// is set (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or
// OTEL_TRACES_EXPORTER=otlp, and neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none.
func TracingEnabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch strings.ToLower(getenv("OTEL_TRACES_EXPORTER")) {
	case "none":
		return false
	case "otlp":
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// SetupTracing installs the W3C trace-context propagator (always: an incoming traceparent is
// passed on to the systems the process calls even when it records nothing) and, when
// TracingEnabled, a tracer provider exporting over OTLP/HTTP as the OTEL_* variables say
// (endpoint, headers, timeout, sampler, service name and resource attributes). shutdown flushes
// the spans not yet exported.
func SetupTracing(ctx context.Context, service string, getenv func(string) string, log logrus.FieldLogger) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if !TracingEnabled(getenv) {
		return func(context.Context) error { return nil }, nil
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: only http/protobuf is supported", proto)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("creating the OTLP trace exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(Resource(ctx, service, log)))
	otel.SetTracerProvider(tp)
	log.WithField("service", service).Info("exporting traces over OTLP (OTEL_* variables)")
	return tp.Shutdown, nil
}

// Resource describes the process: service.name (OTEL_SERVICE_NAME overrides service) and
// service.version, then OTEL_RESOURCE_ATTRIBUTES.
func Resource(ctx context.Context, service string, log logrus.FieldLogger) *resource.Resource {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service), attribute.String("service.version", ReadBuild().Version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		// A partial resource is still usable (e.g. a malformed OTEL_RESOURCE_ATTRIBUTES entry).
		log.WithError(err).Warn("reading the trace resource attributes")
	}
	return res
}
