"""The live state as Prometheus/OpenMetrics metric families (prometheus_client custom collector).

One family per catalog metric (``metrics.telemetry``: gauge or counter, unit suffix and ``# UNIT``
metadata, ``# HELP`` from the catalog's description), with labels ``host``, ``chip`` and one per
instance axis; series whose latest window is null are left out, never written as NaN. Besides them:
``perfonto_catalog_info`` (generation, catalog hash, perfonto version) and the server's own counters
(``perfonto_serve_samples_total``, ``…_windows_total``, ``…_null_windows_total{metric}``,
``…_source_errors_total``, ``…_last_sample_timestamp_seconds``, ``…_lag_seconds``).
"""

from __future__ import annotations

import math
from typing import Callable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from .live import LiveMetrics


def _help(e, m) -> str:
    """The ``# HELP`` text: the description on one line (a counter's says it is served as a running
    total). prometheus_client escapes ``\\`` and LF; a CR, another control character or a Unicode line
    or paragraph separator (U+2028/9, which some parsers split at) would still break the line, so each
    becomes a space."""
    scale = "" if e.unit.factor == 1 else f", exported × {e.unit.factor:g}"
    desc = "".join(" " if (ord(ch) < 32 and ch != "\n") or ch in "\x7f\x85\u2028\u2029" else ch for ch in m.description)
    # a counter is served as its running total (the catalog's description is of one window's amount)
    total = "; served as the running total since the server started" if e.instrument == "counter" else ""
    return f"{desc} (perfonto metric {e.metric} [{m.unit_text}]{scale}{total})"


class LiveCollector(Collector):
    """Collects ``live``'s snapshot at every scrape. ``status()`` returns the source's counters:
    ``errors`` (int) and ``lag_s`` (float or None, how far the source is behind real time)."""

    def __init__(self, live: LiveMetrics, info: dict[str, str], status: Callable[[], dict], prefix: str = "perfonto"):
        self.live, self.info, self.status, self.prefix = live, info, status, prefix

    def collect(self):
        """Yield every family (module docstring) from one consistent snapshot."""
        snap = self.live.snapshot()
        graph = self.live.graph
        p = self.prefix
        yield InfoMetricFamily(f"{p}_catalog", "The compiled metric catalog these series come from.", value=self.info)
        for name, e in self.live.expositions.items():
            labels = ["host", "chip", *e.labels]
            cls = GaugeMetricFamily if e.instrument == "gauge" else CounterMetricFamily
            fam = cls(e.prom_name, _help(e, graph.metrics[name]), labels=labels, unit=e.unit.words)
            for host, chip, idx, x in snap.points(name):
                lv = [host, chip, *(str(i) for i in idx)]
                if e.instrument == "gauge":
                    fam.add_metric(lv, x)
                else:
                    fam.add_metric(lv, x, created=snap.created_s)
            yield fam
        yield from self._own(snap)

    def _own(self, snap):
        p = self.prefix
        st = self.status()
        c = CounterMetricFamily(
            f"{p}_serve_samples", "Raw samples pushed through the streaming evaluator (one per chip each).", labels=[]
        )
        c.add_metric([], snap.samples * max(len(snap.series), 1) if snap.series else 0, created=snap.created_s)
        yield c
        c = CounterMetricFamily(
            f"{p}_serve_windows", "Windows evaluated per chip (each sample after a baseline closes one).", labels=[]
        )
        c.add_metric([], snap.windows, created=snap.created_s)
        yield c
        c = CounterMetricFamily(
            f"{p}_serve_null_windows", "Window values that were null (chip × window), per metric.", labels=["metric"]
        )
        for name, n in snap.null_windows.items():
            c.add_metric([name], n, created=snap.created_s)
        yield c
        c = CounterMetricFamily(f"{p}_serve_source_errors", "Parts skipped or source failures.", labels=[])
        c.add_metric([], st.get("errors", 0), created=snap.created_s)
        yield c
        g = GaugeMetricFamily(
            f"{p}_serve_last_sample_timestamp_seconds",
            "Device timestamp of the latest sample of each chip (the chip's own clock).",
            labels=["host", "chip"],
            unit="seconds",
        )
        for ci, (host, chip) in enumerate(snap.series):
            if snap.last_timestamp_ns[ci] >= 0:
                g.add_metric([host, chip], float(snap.last_timestamp_ns[ci]) * 1e-9)
        yield g
        lag = st.get("lag_s")
        g = GaugeMetricFamily(
            f"{p}_serve_lag_seconds",
            "How far the source is behind real time (emulation: behind the "
            "wall clock; follow: since the latest part was read).",
            labels=[],
            unit="seconds",
        )
        if lag is not None and math.isfinite(lag):
            g.add_metric([], lag)
        yield g


def registry_for(collector: LiveCollector) -> CollectorRegistry:
    """A registry holding only ``collector`` (no process or platform collectors: every family on
    ``/metrics`` is perfonto's)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)
    return reg
