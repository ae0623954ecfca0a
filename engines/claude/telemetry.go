package claude

// Claude Code exports its OpenTelemetry metrics and events (as OTLP logs) when
// telemetry is enabled in its environment, and its spans (a turn's model requests and
// tool calls) with its enhanced-telemetry beta switched on. The platform hands it the box's forward to
// the RuntimeProfile's tracing endpoint (engines.EngineStartupContext.TracingEndpoint);
// the exports then go out over OTLP/HTTP JSON to /v1/metrics, /v1/logs and /v1/traces
// there.

// Export intervals, in milliseconds, short enough that a turn's telemetry leaves the
// box within seconds: Claude Code's defaults (60 s for metrics, 5 s for events) would
// hold a short Session's metrics until the program exits.
const (
	metricExportIntervalMillis = "5000"
	logsExportIntervalMillis   = "1000"
	tracesExportIntervalMillis = "1000"
)

// telemetryEnv is the environment that makes Claude Code export its telemetry to
// endpoint, or nil when endpoint is empty (no telemetry leaves the box).
func telemetryEnv(endpoint string) map[string]string {
	if endpoint == "" {
		return nil
	}
	return map[string]string{
		"CLAUDE_CODE_ENABLE_TELEMETRY":        "1",
		"OTEL_METRICS_EXPORTER":               "otlp",
		"OTEL_LOGS_EXPORTER":                  "otlp",
		"OTEL_TRACES_EXPORTER":                "otlp",
		"CLAUDE_CODE_ENHANCED_TELEMETRY_BETA": "1",
		"OTEL_TRACES_EXPORT_INTERVAL":         tracesExportIntervalMillis,
		"OTEL_EXPORTER_OTLP_PROTOCOL":         "http/json",
		"OTEL_EXPORTER_OTLP_ENDPOINT":         endpoint,
		"OTEL_METRIC_EXPORT_INTERVAL":         metricExportIntervalMillis,
		"OTEL_LOGS_EXPORT_INTERVAL":           logsExportIntervalMillis,
	}
}
