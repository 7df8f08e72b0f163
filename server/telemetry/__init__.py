"""KIP-714 client telemetry: client-metrics subscriptions (CLIENT_METRICS config resources),
the ClientMetricsManager behind GetTelemetrySubscriptions / PushTelemetry, and the OTLP reader
that turns pushed MetricsData into the latest values /metrics exposes."""
