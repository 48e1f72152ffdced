"""Export the live state over OTLP (OpenTelemetry SDK, OTLP/HTTP protobuf exporter).

Every catalog metric becomes an asynchronous instrument named and typed as in ``metrics.telemetry``
(and as in the registry ``perfonto export semconv`` writes): an observable gauge holding the latest
window value, or an observable counter holding the running total (cumulative temporality), with the
UCUM unit and the catalog's description. Attributes: ``perfonto.chip`` and ``perfonto.<axis>`` (ints);
the resource carries ``service.name`` = perfonto, ``host.name``, ``perfonto.generation`` and
``perfonto.catalog_hash`` (a series from another host than the resource's gets its own ``host.name``
attribute). Null series are not observed. The SDK's reader exports every ``interval_s`` seconds.
"""

from __future__ import annotations

import logging
import threading

from .live import LiveMetrics


class OtlpExport:
    """Periodic OTLP export of ``live`` to ``endpoint`` (an OTLP/HTTP metrics URL, e.g.
    ``http://127.0.0.1:4318/v1/metrics``). ``shutdown()`` flushes and stops it."""

    def __init__(
        self,
        live: LiveMetrics,
        endpoint: str,
        interval_s: float,
        resource: dict[str, str],
        timeout_s: float = 5.0,
        version: str = "",
    ):
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource

        self.live, self.timeout_s = live, timeout_s
        exporter = OTLPMetricExporter(endpoint=endpoint, timeout=timeout_s)
        self.exporter = exporter
        self.reader = PeriodicExportingMetricReader(
            exporter, export_interval_millis=interval_s * 1000.0, export_timeout_millis=timeout_s * 1000.0
        )
        self.provider = MeterProvider(
            resource=Resource.create({"service.name": "perfonto", "host.name": live.host, **resource}),
            metric_readers=[self.reader],
        )
        meter = self.provider.get_meter("perfonto.serve", version)
        graph = live.graph
        for name, e in live.expositions.items():
            make = meter.create_observable_gauge if e.instrument == "gauge" else meter.create_observable_counter
            make(
                e.otel_name,
                callbacks=[self._callback(name)],
                unit=e.unit.ucum,
                description=graph.metrics[name].description,
            )

    def _callback(self, name: str):
        from opentelemetry.metrics import Observation

        e = self.live.expositions[name]
        host = self.live.host

        def observe(options):
            out = []
            for h, chip, idx, x in self.live.snapshot().points(name):
                attrs = {"perfonto.chip": int(chip), **{a: int(i) for a, i in zip(e.attributes, idx)}}
                if h != host:
                    attrs["host.name"] = h
                out.append(Observation(x, attrs))
            return out

        return observe

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Collect and export now; True when the export went through."""
        return bool(self.provider.force_flush(timeout_millis=timeout_s * 1000.0))

    def shutdown(self, retry_s: float = 1.0) -> None:
        """Export a last time and stop the reader. The last export has the exporter's own timeout (a slow
        collector that answers gets it); past ``retry_s`` it is not retried (an endpoint that is down
        held the exit for 6.7 s): the export in flight is left to finish, only the retries end."""
        timer = threading.Timer(retry_s, self._end_retries)
        timer.daemon = True
        timer.start()
        try:
            self.provider.shutdown(timeout_millis=(self.timeout_s + 1.0) * 1000.0)
        except Exception as exc:  # the SDK raises on a second shutdown or a failed final export
            logging.getLogger("perfonto.otlp").warning("OTLP shutdown: %s", exc)
        finally:
            timer.cancel()

    def _end_retries(self) -> None:
        """End the exporter's retries (the event its backoff waits on) without closing its connection;
        an SDK without that event has its exporter stopped (which ends an export in flight too)."""
        client = getattr(self.exporter, "_client", None)
        event = getattr(client, "_shutdown_event", None) or getattr(self.exporter, "_shutdown_in_progress", None)
        if isinstance(event, threading.Event):
            event.set()
        else:
            self.exporter.shutdown()
