/** The OTel SDK as the otel tests read it: a meter whose metrics an in-memory exporter holds. */
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  type MetricData,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';

/** An SDK meter with an in-memory exporter, and a way to collect what it holds now. */
export function sdk(scope = 'tiered-limiter-test') {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const provider = new MeterProvider({ readers: [reader] });
  return {
    meter: provider.getMeter(scope),
    async collect(): Promise<Map<string, MetricData>> {
      exporter.reset();
      await reader.forceFlush();
      const metrics = exporter.getMetrics().flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics));
      return new Map(metrics.map((m) => [m.descriptor.name, m]));
    },
    shutdown: () => provider.shutdown(),
  };
}
