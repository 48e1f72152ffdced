"""`perfonto analyze --format openmetrics` (capture/openmetrics.py, issue 27): Prometheus text exposition
and OpenMetrics text read against the shipped `node` catalog — a file of time-stamped samples (the
layout promtool's backfill takes) or a folder of scrapes named by their time; labels the selector leaves
open are the chip (`cpu`: the instances of the `node` catalog's `cpu` axis, sized by the data), `instance`
the host; a series absent from a scrape nulls its windows. The fixture's values are hand-chosen and the
expected shares computed by hand below."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from perfonto.capture.dump_io import DumpError
from perfonto.capture.formats import detect
from perfonto.capture.openmetrics import Selector, collector_table, parse_selector, read_scrapes
from perfonto.cli import main

from helpers import analyze

FIX = Path(__file__).parent / "fixtures" / "openmetrics" / "node-cpu.om"
TYPE = "# HELP node_cpu_seconds Seconds.\n# TYPE node_cpu_seconds counter\n"
IDLE0 = 'node_cpu_seconds_total{cpu="0",mode="idle"}'


def test_a_file_of_time_stamped_scrapes_gives_the_hand_computed_shares(capsys, tmp_path):
    code, doc = analyze(capsys, FIX, tmp_path / "o")
    assert code == 0
    assert [(r["host"], r["chip"]) for r in doc["per_chip"]] == [("h1:9100", 0)]  # one machine per instance label
    assert "cpu: 2 instances from the data (0, 1)" in doc["notes"]  # its CPUs: the `cpu` axis, sized by the data
    # CPU 1's steal is absent from the second scrape: the machine's first two windows are null (their split
    # is unknown), but the running totals around the gap (steal .50 -> .60 at t = 0 and 2 s) bridge it, so the
    # run totals lose nothing (metrics.bridge): over the 3 s, CPU 0: idle .75, user 1.80, system .30, iowait .10,
    # softirq .10 -> busy 2.20 of 3.05 s; CPU 1: idle 2.60, user .20, system .15, steal .20 -> busy .55 of 3.15 s
    per_cpu = doc["metrics"]["cpu.busy_share"]
    assert per_cpu["axes"] == [["cpu.cpu", 2]]
    assert per_cpu["value"] == pytest.approx([2.20 / 3.05, 0.55 / 3.15], abs=1e-12)
    assert doc["metrics"]["cpu.system_share"]["value"] == pytest.approx([0.40 / 3.05, 0.15 / 3.15], abs=1e-12)
    assert doc["null_windows"]["cpu.busy_share"] == {"missing sample": 2}
    # the machine: busy (2.20 + .55) of (3.05 + 3.15) s, a ratio of the totals over the CPUs
    assert doc["metrics"]["busy_share"]["value"] == pytest.approx(2.75 / 6.20, abs=1e-12)
    assert doc["metrics"]["cpus_busy"]["value"] == pytest.approx(2.75 / 3.0, abs=1e-12)  # over 3 s of wall time
    assert doc["metrics"]["steal_share"]["value"] == pytest.approx(0.20 / 6.20, abs=1e-12)  # mpstat's all %steal


def test_a_folder_of_scrapes_named_by_time(capsys, tmp_path):
    d = tmp_path / "scrapes"
    d.mkdir()
    for k, (idle, user) in enumerate([(10.0, 5.0), (10.5, 5.5), (10.75, 6.25)]):
        body = "".join(
            f'node_cpu_seconds_total{{cpu="0",mode="{m}"}} {v}\n'
            for m, v in [
                ("idle", idle),
                ("user", user),
                ("system", 1.0),
                ("iowait", 0.0),
                ("nice", 0.0),
                ("irq", 0.0),
                ("softirq", 0.0),
                ("steal", 0.0),
            ]
        )
        (d / f"{1764650000 + 2 * k}.250.prom").write_text(TYPE + body)  # served without time stamps
    code, doc = analyze(capsys, d, tmp_path / "o")
    assert code == 0
    assert doc["metrics"]["cpu.busy_share"]["value"] == pytest.approx([1.25 / 2.0], abs=1e-12)  # user 1.25 of 2.0 s
    assert doc["metrics"]["busy_share"]["value"] == pytest.approx(1.25 / 2.0, abs=1e-12)  # one CPU: the machine
    assert doc["metrics"]["cpus_busy"]["value"] == pytest.approx(1.25 / 4.0, abs=1e-12)  # over 4 s of wall-clock time
    # a failed scrape (an empty file) and a folder inside are named in a note (found by a session trying to break
    # the reader: both were skipped without a word)
    (d / "1764650006.250.prom").write_text("")
    (d / "more").mkdir()
    code, doc = analyze(capsys, d, tmp_path / "o2")
    notes = " ".join(doc["notes"])
    assert code == 0 and "1 scrape file(s) hold no sample (a failed scrape?): 1764650006.250.prom" in notes
    assert "folder(s) inside it not read (more)" in notes


def test_format_is_recognised_and_collector_dumps_are_not(tmp_path):
    assert detect(FIX) == "openmetrics"
    (tmp_path / "c.csv").write_text("chip,timestamp_ns,a\n0,0,1\n")
    assert detect(tmp_path / "c.csv") == "collector"


def test_selector_grammar():
    assert parse_selector('node_cpu_seconds_total{mode="idle", cpu="0",}') == Selector(
        "node_cpu_seconds_total", (("cpu", "0"), ("mode", "idle"))
    )
    assert parse_selector("up") == Selector("up", ())
    with pytest.raises(DumpError, match=r"signal `x`.*`node\{mode=idle\}` is not a series selector at column 11"):
        parse_selector("node{mode=idle}", "signal `x`")


@pytest.mark.parametrize(
    "text, match",
    [
        (TYPE + 'node_cpu_seconds_total{cpu="0",mode="idle"} 1\n', r"no time stamp; a file of many scrapes needs one"),
        (
            TYPE + 'node_cpu_seconds_total{cpu="0",mode="idle"} 1 1764650000000\nnode_cpu_seconds_total{cpu="0" 2 1\n',
            r"s\.prom:4: ",
        ),
        (TYPE + 'node_cpu_seconds_total{cpu="0",mode="idle"} 1 1764650000000\n', r"1 scrape\(s\); a window needs two"),
        # a scrape cut short in a number (a copy stopped early) read as a smaller count: a counter reset
        (
            TYPE + 'node_cpu_seconds_total{cpu="0",mode="idle"} 1.5 1764650000000\n' + IDLE0 + " 16",
            r"s\.prom:4: the file ends inside a line \(`" + re.escape(IDLE0) + " 16` has no newline",
        ),
    ],
)
def test_bad_scrape_files_name_the_file_and_line(tmp_path, text, match):
    p = tmp_path / "s.prom"
    p.write_text(text)
    with pytest.raises(DumpError, match=match):
        read_scrapes(p)


def test_a_folder_file_without_a_time_in_its_name(tmp_path):
    (tmp_path / "scrape-a.prom").write_text(TYPE + 'node_cpu_seconds_total{cpu="0",mode="idle"} 1\n')
    with pytest.raises(DumpError, match=r"scrape-a\.prom: the file name holds no scrape time"):
        read_scrapes(tmp_path)


def test_not_utf8_and_cli_exit_code(tmp_path, capsys):
    p = tmp_path / "s.prom"
    p.write_bytes(b"# TYPE x counter\nx_total 1 \xff\n")
    code, doc = analyze(capsys, p, tmp_path / "o", "--format", "openmetrics")
    assert (code, doc["ok"]) == (1, False)
    assert "is not UTF-8" in doc["error"] and str(p) in doc["error"]


def test_gauges_nan_and_label_chips():
    from perfonto.capture.openmetrics import Scrape

    sel = {"temp": (Selector("gpu_temp", ()), 1.0, False), "bytes": (Selector("rx_bytes_total", ()), 1.0, True)}
    s = [
        Scrape(
            0.0,
            {
                ("gpu_temp", (("gpu", "a"),)): 40.5,
                ("rx_bytes_total", (("gpu", "a"),)): 10.0,
                ("gpu_temp", (("gpu", "b"),)): float("nan"),
                ("rx_bytes_total", (("gpu", "b"),)): 3.0,
            },
        ),
        Scrape(
            1.0,
            {
                ("gpu_temp", (("gpu", "a"),)): 41.5,
                ("rx_bytes_total", (("gpu", "a"),)): 20.0,
                ("gpu_temp", (("gpu", "b"),)): 39.0,
                ("rx_bytes_total", (("gpu", "b"),)): 4.0,
            },
        ),
    ]
    notes: list[str] = []
    t = collector_table(s, sel, label="x", notes=notes)
    assert t.column("chip").to_pylist() == [0, 1, 0, 1]  # "a", "b": numbered in order of first appearance
    assert "chips numbered by the labels gpu: 0 = {'gpu': 'a'}; 1 = {'gpu': 'b'}" in notes[0]
    assert t.column("temp").to_pylist() == [40, None, 42, 39]  # a gauge rounded to raw counts (scale 1 here), NaN null
    assert t.column("bytes").to_pylist() == [10, 3, 20, 4]


DCGM = Path(__file__).parent / "fixtures" / "dcgm-exporter"


def test_dcgm_exporter_scrapes_against_the_shipped_dcgm_catalog(capsys, tmp_path):
    """dcgm-exporter's scrapes (fixture README: laid out as NVIDIA's DCGM-Exporter documentation
    describes) are recognised, read against the shipped `dcgm` catalog, the `gpu` label numbering the
    chips beside UUID and modelName, `Hostname` the host. Expected values by hand from the fixture."""
    code, doc = analyze(capsys, DCGM, tmp_path / "o", "--generation", "dcgm_h100")
    assert code == 0
    chips = {r["chip"]: r["metrics"] for r in doc["per_chip"]}
    assert {r["host"] for r in doc["per_chip"]} == {"node-17"} and sorted(chips) == [0, 1]
    # energy counter (mJ): GPU 0 1,000,000 -> 1,850,000 over 2 s = 425 W, GPU 1 600,000 mJ / 2 s = 300 W
    assert chips[0]["power.average"] == pytest.approx(425.0, abs=1e-9)
    assert chips[1]["power.average"] == pytest.approx(300.0, abs=1e-9)
    assert doc["metrics"]["power.average"]["value"] == pytest.approx(725.0, abs=1e-9)  # a total over the GPUs
    assert doc["metrics"]["power.tdp_share"]["value"] == pytest.approx(725.0 / 1400.0, abs=1e-12)
    # tensor active 0.2, 0.4, 0.6: each window the mean of its two samples, 0.3 and 0.5, run 0.4 x 989 TFLOP/s
    assert chips[0]["tensor.flops_estimate"] == pytest.approx(0.4 * 989, rel=1e-12)
    assert doc["metrics"]["tensor.flops_estimate"]["value"] == pytest.approx(0.5 * 989, rel=1e-12)  # (0.4 + 0.1) x peak
    assert chips[1]["hbm.bandwidth_estimate"] == pytest.approx(0.25 * 3.35, rel=1e-12)
    # power draw 390.5, 410.0, 440.75 W: windows 400.25 and 425.375, run 412.8125
    assert chips[0]["power.draw"] == pytest.approx(412.8125, abs=1e-9)
    assert chips[0]["nvlink.bandwidth"] == pytest.approx(300.0, rel=1e-12)  # tx mean 200 GB/s + rx 100 GB/s


def test_dcgm_generation_follows_the_gpu_model(capsys, tmp_path):
    """The shipped generation is the one of the GPU model dcgm-exporter names (modelName); a model without
    one gets the catalog folder's (dcgm_h200) and a note saying so."""
    code, doc = analyze(capsys, DCGM, tmp_path / "o")  # modelName="NVIDIA H100 80GB HBM3"
    assert code == 0 and doc["generation"] == "dcgm_h100"
    for model, gen, hbm in (("NVIDIA H200", "dcgm_h200", 4.8), ("NVIDIA A100-SXM4-80GB", "dcgm_h200", 4.8)):
        d = tmp_path / model.replace(" ", "_")
        d.mkdir()
        for f in DCGM.glob("*.prom"):
            (d / f.name).write_text(f.read_text().replace("NVIDIA H100 80GB HBM3", model))
        capsys.readouterr()
        assert main(["analyze", str(d), "--out", str(tmp_path / (d.name + "-o")), "--json"]) == 0
        got = capsys.readouterr()
        doc = json.loads(got.out)
        assert doc["generation"] == gen
        chips = {r["chip"]: r["metrics"] for r in doc["per_chip"]}
        assert chips[0]["hbm.bandwidth_estimate"] == pytest.approx(0.5 * hbm, rel=1e-12)
        assert ("has no shipped DCGM generation" in got.err) == ("A100" in model)


def test_a_negative_gauge_is_a_clear_error():
    from perfonto.capture.openmetrics import Scrape

    s = [Scrape(0.0, {("temp", ()): -5.0}), Scrape(1.0, {("temp", ()): 3.0})]
    with pytest.raises(
        DumpError, match=r"x \(the scrape at 0 s\): the series of `t` holds -5, outside an unsigned 64-bit register"
    ):
        collector_table(s, {"t": (Selector("temp", ()), 1.0, False)}, label="x")


def test_terminal_html_and_json_print_one_metric_count(capsys, tmp_path):
    """Issue 27: one count, printed alike by the terminal report, the HTML page and the JSON."""
    from perfonto.analysis.report_json import metric_count_text

    capsys.readouterr()
    assert main(["analyze", str(FIX), "--out", str(tmp_path / "o")]) == 0
    text = capsys.readouterr().out
    doc = json.loads((tmp_path / "o" / "report.json").read_text())
    c = doc["metric_count"]
    assert c == {"evaluated": 13, "with_value": 13, "request": 0, "unavailable": 0}  # 6 per-CPU, 7 machine
    assert metric_count_text(c) in " ".join(text.split())
    assert main(["report", str(tmp_path / "o"), "--html", str(tmp_path / "r.html"), "--no-timeline"]) == 0
    assert f"<th>metrics</th><td>{metric_count_text(c)}</td>" in (tmp_path / "r.html").read_text()


@pytest.mark.parametrize(
    "name, ok",
    [
        ("1764650000250.prom", True),
        ("1764650000250000000.prom", True),
        ("17646500002.prom", False),
        ("1764650000.250.prom~x", True),
    ],
)
def test_scrape_names_in_ms_or_ns_are_read_in_their_unit(tmp_path, name, ok):
    """`date +%s%3N` and `%s%N` names were read as their first 11 digits: rates 10x off (found by a
    session trying to break the reader); now by digit count, or refused."""
    d = tmp_path / "s"
    d.mkdir()
    (d / name).write_text(TYPE + 'node_cpu_seconds_total{cpu="0",mode="idle"} 1\n')
    (d / "1764650001.prom").write_text(TYPE + 'node_cpu_seconds_total{cpu="0",mode="idle"} 2\n')
    if ok:
        assert read_scrapes(d)[0].time_s == pytest.approx(1764650000.25, abs=1e-6)
    else:
        with pytest.raises(DumpError, match="holds no scrape time"):
            read_scrapes(d)


@pytest.mark.parametrize(
    "text, match",
    [
        # OpenMetrics takes seconds: ms time stamps are a date in the year 57,000
        (
            TYPE + 'node_cpu_seconds_total{cpu="0",mode="idle"} 1 '
            '1764650000000\nnode_cpu_seconds_total{cpu="0",mode="idle"} 2 '
            "1764650001000\n# EOF\n",
            r"read as OpenMetrics \(seconds\), are not a date between 2000 and 2100",
        ),
        # Prometheus text takes ms: seconds are a date in January 1970
        (
            TYPE
            + 'node_cpu_seconds_total{cpu="0",mode="idle"} 1 1764650000\nnode_cpu_seconds_total{cpu="0",mode="idle"} 2 '
            "1764650001\n",
            r"without `# EOF` \(milliseconds\), are not a date",
        ),
        (
            TYPE + 'node_cpu_seconds_total{cpu="0",mode="idle"} 1 '
            '1764650000000\nnode_cpu_seconds_total{cpu="0",mode="idle"} 999 '
            "1764650000000\n",
            r's\.prom:4 \(and line 3\): the series node_cpu_seconds_total\{cpu="0",mode="idle"\} twice at time '
            r"1764650000\.000 s",  # its lines, and the time in full (it printed 1.76465e+09)
        ),
    ],
)
def test_time_stamp_units_and_duplicate_series_are_errors(tmp_path, text, match):
    p = tmp_path / "s.prom"
    p.write_text(text)
    with pytest.raises(DumpError, match=match):
        read_scrapes(p)


def test_a_series_twice_at_one_time_and_a_time_stamp_past_any_date_name_their_line(tmp_path):
    """Found by a session trying to break the reader: a second `node_cpu_seconds_total{cpu="0",mode="idle",…}` at
    the time of line 3 was dropped by the OpenMetrics parser without a word, and a time stamp of 1e20 gave
    "'float' object has no attribute 'sec'" with no line."""
    lines = FIX.read_text().splitlines()
    assert lines[2].startswith('node_cpu_seconds_total{cpu="0",mode="idle"') and lines[2].endswith(" 1764650000.000")
    dup = tmp_path / "dup.om"
    dup.write_text("\n".join([*lines[:3], lines[2].replace(" 100.00 ", " 103.00 "), *lines[3:]]) + "\n")
    with pytest.raises(
        DumpError,
        match=r"dup\.om:4: the series node_cpu_seconds_total is written again for the time "
        r"stamp of line 3",
    ):
        read_scrapes(dup)
    far = tmp_path / "far.om"
    far.write_text("\n".join([*lines[:5], lines[5].rsplit(" ", 1)[0] + " 1e20", *lines[6:]]) + "\n")
    with pytest.raises(DumpError, match=r"far\.om:6: the time stamp 1e20 is not a date between 2000 and 2100"):
        read_scrapes(far)


def test_a_cpu_time_counter_that_jumps_past_wall_time_is_a_reset(capsys, tmp_path):
    """Found by a session trying to break the readers: node_exporter's idle counter jumping by 1e6 s within a 1 s
    scrape read busy_share 7.3e-06 with nothing said. One CPU's time grows at most 1 s/s: the node catalog declares
    `max_rate: 2 s/s` on its counters, so that window (and the one after, which falls back) is a reset, not data."""
    from helpers import analyze

    text = FIX.read_text()
    assert text.count(" 100.25 1764650001.000") == 1
    bad = tmp_path / "jump.om"
    bad.write_text(text.replace(" 100.25 1764650001.000", " 1000100.25 1764650001.000"))
    code, doc = analyze(capsys, bad, tmp_path / "o")
    assert code == 0 and doc["null_windows"]["busy_share"] == {"reset (implausible increase or decrease)": 2}
    code, good = analyze(capsys, FIX, tmp_path / "g")
    assert 0 < doc["metrics"]["busy_share"]["value"] < 1
    assert "reset (implausible increase or decrease)" not in good["null_windows"]["busy_share"]  # the fixture's own


def test_a_negative_value_in_a_folder_of_scrapes_names_its_file(tmp_path):
    """Found by a session trying to break the reader: `DCGM_FI_PROF_GR_ENGINE_ACTIVE{…} -3` in one scrape named only
    the folder."""
    import re
    import shutil

    from perfonto.capture.openmetrics import openmetrics_capture
    from perfonto.ontology.loader import load_generation

    d = tmp_path / "dcgm"
    shutil.copytree(Path(__file__).parent / "fixtures" / "dcgm-exporter", d)
    f = d / "1764650001.000.prom"
    text, n = re.subn(r"^(DCGM_FI_PROF_GR_ENGINE_ACTIVE\{[^}]*\}) \S+", r"\1 -3", f.read_text(), count=1, flags=re.M)
    assert n == 1
    f.write_text(text)
    gen, _ = load_generation(str(Path(__file__).parents[1] / "perfonto" / "catalogs" / "dcgm" / "dcgm_h100.yaml"))
    with pytest.raises(DumpError, match=r"1764650001\.000\.prom: the series of `gpu\.gr_engine_active` holds -3"):
        openmetrics_capture(d, gen, [])


def test_a_label_that_changes_between_scrapes_is_named(capsys, tmp_path):
    """Found by a session trying to break the reader: a `modelName` that changed in the last scrape split every GPU in
    two (4 chips, all null) and the note did not say which label changed."""
    import shutil

    d = tmp_path / "dcgm"
    shutil.copytree(Path(__file__).parent / "fixtures" / "dcgm-exporter", d)
    f = d / "1764650002.000.prom"
    assert 'modelName="NVIDIA H100 80GB HBM3"' in f.read_text()
    f.write_text(f.read_text().replace('modelName="NVIDIA H100 80GB HBM3"', 'modelName="NVIDIA H200"'))
    code, doc = analyze(capsys, d, tmp_path / "o")
    notes = " ".join(doc["notes"])
    assert code == 0 and "the label that changed: modelName ('NVIDIA H100 80GB HBM3' and 'NVIDIA H200')" in notes


def test_eof_without_a_newline_and_a_duplicate_in_a_later_scrape(tmp_path):
    """A design review: OpenMetrics allows `# EOF` without a final newline (it was refused as a cut line),
    and a series written twice in the third scrape of a file named the first scrape's lines."""
    text = FIX.read_text()
    assert text.rstrip().endswith("# EOF")
    bare = tmp_path / "bare.om"
    bare.write_text(text.rstrip("\n"))
    assert len(read_scrapes(bare)) == len(read_scrapes(FIX))
    s = (
        TYPE
        + "".join(f"{IDLE0} {v} {t}\n" for v, t in ((1, 1764650000000), (2, 1764650001000), (3, 1764650002000)))
        + f"{IDLE0} 9 1764650002000\n"
    )
    p = tmp_path / "s.prom"
    p.write_text(s)
    with pytest.raises(DumpError, match=r"s\.prom:6 \(and line 5\): the series"):
        read_scrapes(p)
