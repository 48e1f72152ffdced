"""Messages new users read wrong. `deprecated-signal` warns a metric author whose formula reads a signal a
later generation removes; the shipped library's own `hbm.refresh_overhead` (a sohu metric, unavailable on
caelius by design) reads `hbm.refresh_cycles` knowingly, and two new users read "1 warning(s)" on every
`perfonto check` of an unmodified catalog as something they had done wrong."""

from __future__ import annotations

from perfonto.cli import main
from perfonto.metrics.catalog import load_catalog


def test_the_shipped_catalog_checks_without_warnings(capsys):
    assert main(["check"]) == 0
    out = capsys.readouterr()
    assert "0 error(s), 0 warning(s)" in out.out + out.err
    cat = load_catalog(None, "sohu")
    assert "hbm.refresh_overhead" in cat.graph.metrics  # still compiled and evaluated on sohu


def test_a_users_metric_reading_a_deprecated_signal_is_warned(tmp_path):
    (tmp_path / "mine.metrics").write_text(
        'metric my.refresh [percent] = avg(hbm.refresh_cycles) / (spec.clock.hbm * interval)\n  "refresh share"\n'
    )
    cat = load_catalog(tmp_path, "sohu")
    (w,) = [d for d in cat.diagnostics if d.code == "deprecated-signal"]
    assert "metric `my.refresh` reads deprecated signal `hbm.refresh_cycles`" in w.message
    assert w.span.file.endswith("mine.metrics") and w.span.line == 1


def test_unavailable_metrics_count_only_the_absent_signals_they_read(tmp_path, capsys):
    """A new user dropped `hbm.write_bytes` from a run's dump and read "11 metric(s) unavailable: the dump
    lacks 2 signal(s) they read": the second, `dma.transfer_sizes`, is absent from every emulator dump and
    none of those metrics reads it."""
    import pyarrow.parquet as pq

    from live_helpers import emulate
    from perfonto.ontology import load_generation

    gen = load_generation("sohu")[0]
    path = emulate(tmp_path / "run", gen, chips=1, duration_s=0.05)
    pq.write_table(pq.read_table(path).drop(["hbm.write_bytes"]), tmp_path / "sub.parquet")
    assert main(["analyze", str(tmp_path / "sub.parquet"), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr()
    line = next(ln for ln in (out.out + out.err).splitlines() if "metric(s) unavailable" in ln)
    assert line.endswith("the dump lacks 1 signal(s) they read"), line
