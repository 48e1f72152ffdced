"""`perfonto serve --otlp`: the OpenTelemetry SDK pushes the same values over OTLP/HTTP (protobuf) to a
receiver on 127.0.0.1, with the semconv registry's names, units and attributes."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow.parquet as pq
import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

from live_helpers import batch, emulate, publish, write_parts
from perfonto.analysis.follow import Follower, FollowSource
from perfonto.metrics.catalog import load_catalog
from perfonto.metrics.telemetry import expositions
from perfonto.serve import Server


class _Receiver(BaseHTTPRequestHandler):
    requests: list = []

    def log_message(self, *a):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        req = ExportMetricsServiceRequest()
        req.ParseFromString(body)
        type(self).requests.append((self.path, req))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()


@pytest.fixture()
def receiver():
    _Receiver.requests = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1/metrics", _Receiver.requests
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_otlp_export_carries_the_batch_values(tmp_path, receiver):
    endpoint, requests = receiver
    graph = load_catalog(None, "sohu").graph
    counters = emulate(tmp_path / "emu", graph.generation)
    ev = batch(graph, counters, tmp_path)
    for p in write_parts(pq.ParquetFile(str(counters)).read(), tmp_path / "parts", 2):
        publish(p)
    source = FollowSource(Follower(tmp_path / "parts", graph.generation), poll_s=0.05)
    server = Server(graph, source, port=0, host="node-c", otlp=endpoint, otlp_interval_s=60.0)
    stop = threading.Event()
    runner = threading.Thread(target=server.run, args=(stop,), daemon=True)
    runner.start()
    try:
        W = ev.windows.interval.shape[0]
        for _ in range(200):
            if server.live.snapshot().windows == W:
                break
            stop.wait(0.05)
        assert server.live.snapshot().windows == W
        assert server.otlp.flush(timeout_s=10)
    finally:
        stop.set()
        runner.join(timeout=30)
    assert not runner.is_alive()
    assert requests and all(path == "/v1/metrics" for path, _ in requests)
    req = requests[0][1]
    res = {kv.key: kv.value.string_value for kv in req.resource_metrics[0].resource.attributes}
    assert (
        res["service.name"] == "perfonto"
        and res["host.name"] == "node-c"
        and res["perfonto.catalog_hash"] == graph.content_hash
    )
    got = {m.name: m for sm in req.resource_metrics[0].scope_metrics for m in sm.metrics}
    exp = expositions(graph)
    e = exp["hbm.bytes"]
    m = got[e.otel_name]
    assert m.unit == "By" and m.sum.is_monotonic and m.sum.aggregation_temporality == 2  # cumulative
    for p in m.sum.data_points:
        chip = {kv.key: kv.value.int_value for kv in p.attributes}["perfonto.chip"]
        ci = list(ev.chips).index(chip)
        assert p.as_double == pytest.approx(float(ev.window["hbm.bytes"][:, ci].sum()) * 1e9, rel=1e-9)
    e = exp["mfu"]
    m = got[e.otel_name]
    assert m.unit == "1" and m.HasField("gauge") and len(m.gauge.data_points) == len(ev.chips)
    for p in m.gauge.data_points:
        chip = {kv.key: kv.value.int_value for kv in p.attributes}["perfonto.chip"]
        assert p.as_double == pytest.approx(float(ev.window["mfu"][-1, list(ev.chips).index(chip)]) * 0.01, rel=1e-12)
    import numpy as np

    observed = {
        e.otel_name
        for n, e in exp.items()
        if (~np.isnan(ev.window[n][-1] if e.instrument == "gauge" else ev.window[n])).any()
    }
    assert set(got) == observed and len(observed) > 60  # null series are not observed
