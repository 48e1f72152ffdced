"""Instance axes sized by the data (`instances: {cpu: from_data}`, issue 27): the shipped `linux` and `node`
catalogs declare their CPUs so, a capture's reader finds the CPUs it holds, the catalog is compiled for
that count (cached apart per count) and rollups run over the CPUs present. The perf and node_exporter
captures below are hand-written in the tools' layouts; every expected value is computed by hand in the
comments beside it."""

from __future__ import annotations

from importlib import resources

import pytest

from helpers import analyze
from perfonto.cli import main

LINUX = str(resources.files("perfonto").joinpath("catalogs", "linux"))
NODE = str(resources.files("perfonto").joinpath("catalogs", "node"))


def _perf_a(path, per_cpu: dict[int, tuple[list[float], list[int]]]) -> str:
    """A `perf stat -I 100 -A -x,` file: per CPU, task-clock (msec) and page faults per 100 ms interval."""
    lines = []
    for k in range(2):
        t = f"{0.1 * (k + 1):15.9f}"
        for cpu, (clock, faults) in per_cpu.items():
            lines.append(f"{t},CPU{cpu},{clock[k]:.2f},msec,task-clock,{int(clock[k] * 1e6)},100.00,,")
            lines.append(f"{t},CPU{cpu},{faults[k]},,page-faults,{int(clock[k] * 1e6)},100.00,,")
    path.write_text("# started on Wed Dec  2 10:00:00 2026\n\n" + "\n".join(lines) + "\n")
    return str(path)


def test_perf_captures_of_2_and_4_cpus_with_one_catalog(capsys, tmp_path):
    two = _perf_a(tmp_path / "two.csv", {0: ([50.0, 70.0], [10, 4]), 1: ([20.0, 30.0], [4, 26])})
    code, doc = analyze(capsys, two, tmp_path / "o2")
    assert code == 0 and "cpu: 2 instances from the data (0, 1)" in doc["notes"]
    m = doc["metrics"]
    # CPU 0 ran 50 + 70 = 120 ms, CPU 1 20 + 30 = 50 ms, over the 0.2 s from perf's start to its last stamp
    assert m["cpu.utilized"]["value"] == pytest.approx([0.120 / 0.2, 0.050 / 0.2], rel=1e-12)
    assert m["cpus_utilized"]["value"] == pytest.approx(0.170 / 0.2, rel=1e-12)  # the machine: 0.85 CPUs
    # faults: CPU 0 14 in 0.120 s, CPU 1 30 in 0.050 s; the machine 44 in 0.170 s of task-clock
    assert m["cpu.page_faults_per_second"]["value"] == pytest.approx([14 / 0.120, 30 / 0.050], rel=1e-12)
    assert m["page_faults.per_second"]["value"] == pytest.approx(44 / 0.170, rel=1e-12)

    # four CPUs, numbered 0, 1, 4 and 5 (2 and 3 offline): the same catalog, sized 4; no CPU is missing
    four = _perf_a(
        tmp_path / "four.csv",
        {
            0: ([100.0, 100.0], [5, 5]),
            1: ([40.0, 60.0], [3, 2]),
            4: ([10.0, 0.0], [1, 0]),
            5: ([90.0, 80.0], [0, 17]),
        },
    )
    code, doc = analyze(capsys, four, tmp_path / "o4")
    assert code == 0 and "cpu: 4 instances from the data (0, 1, 4, 5)" in doc["notes"]
    m = doc["metrics"]
    # 200, 100, 10 and 170 ms over 0.2 s
    assert m["cpu.utilized"]["value"] == pytest.approx([1.0, 0.5, 0.05, 0.85], rel=1e-12)
    assert m["cpu.utilized"]["axes"] == [["task.cpu", 4]]
    assert m["cpu.utilized"]["instances"] == {"task.cpu": ["0", "1", "4", "5"]}  # which CPU each value is
    assert m["cpus_utilized"]["value"] == pytest.approx(0.480 / 0.2, rel=1e-12)  # 2.4 CPUs
    # 10 faults in 0.2 s, 5 in 0.1 s, 1 in 0.01 s, 17 in 0.17 s; the machine 33 in 0.48 s
    assert m["cpu.page_faults_per_second"]["value"] == pytest.approx([50.0, 50.0, 100.0, 100.0], rel=1e-12)
    assert m["page_faults.per_second"]["value"] == pytest.approx(33 / 0.480, rel=1e-12)


def _scrape(cpus: dict[int, dict[str, float]]) -> str:
    modes = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    body = "# HELP node_cpu_seconds_total Seconds.\n# TYPE node_cpu_seconds_total counter\n"
    for cpu, secs in cpus.items():
        body += "".join(f'node_cpu_seconds_total{{cpu="{cpu}",mode="{m}"}} {secs.get(m, 0.0)}\n' for m in modes)
    return body


def test_node_exporter_scrapes_of_3_cpus(capsys, tmp_path):
    d = tmp_path / "scrapes"
    d.mkdir()
    scrapes = [
        {0: {"idle": 10.0, "user": 5.0}, 1: {"idle": 20.0, "system": 1.0}, 2: {"idle": 0.0, "user": 3.0}},
        {0: {"idle": 11.0, "user": 6.0}, 1: {"idle": 21.75, "system": 1.25}, 2: {"idle": 0.0, "user": 5.0}},
        {0: {"idle": 11.5, "user": 7.5}, 1: {"idle": 23.5, "system": 1.5}, 2: {"idle": 1.0, "user": 6.0}},
    ]
    for k, s in enumerate(scrapes):
        (d / f"{1764650000 + 2 * k}.prom").write_text(_scrape(s))  # every 2 s
    code, doc = analyze(capsys, d, tmp_path / "o")
    assert code == 0 and "cpu: 3 instances from the data (0, 1, 2)" in doc["notes"]
    m = doc["metrics"]
    # over 4 s: CPU 0 idle 1.5, user 2.5; CPU 1 idle 3.5, system 0.5; CPU 2 idle 1, user 3
    assert m["cpu.busy_share"]["value"] == pytest.approx([2.5 / 4, 0.5 / 4, 3.0 / 4], abs=1e-12)
    assert m["cpu.user_share"]["value"] == pytest.approx([2.5 / 4, 0.0, 3.0 / 4], abs=1e-12)
    assert m["busy_share"]["value"] == pytest.approx(6.0 / 12.0, abs=1e-12)  # the machine: 6 busy of 12 CPU-s
    assert m["cpus_busy"]["value"] == pytest.approx(6.0 / 4.0, abs=1e-12)  # 1.5 CPUs busy over 4 s


def test_the_catalog_is_compiled_and_cached_per_instance_count():
    from perfonto.metrics import catalog_cache
    from perfonto.metrics.catalog import load_catalog

    placeholder = load_catalog(LINUX, None, library=False)
    assert placeholder.generation.signals["task.clock"].axes == (("cpu", 1),)
    assert any("1 instance here, a placeholder" in n for n in placeholder.notes)
    two = load_catalog(LINUX, None, library=False, instances={"cpu": ("0", "1")})
    three = load_catalog(LINUX, None, library=False, instances={"cpu": ("0", "1", "7")})
    assert two.graph.generation.signals["task.clock"].axes == (("cpu", 2),)
    assert three.graph.generation.signals["task.clock"].axes == (("cpu", 3),)
    assert three.graph.metrics["cpu.utilized"].axes == (("task.cpu", 3),)
    hashes = {c.generation.content_hash for c in (placeholder, two, three)}
    assert len(hashes) == 3
    keys = {catalog_cache.key(LINUX, None, False, i) for i in (None, {"cpu": ("0", "1")}, {"cpu": ("0", "2")})}
    assert len(keys) == 3  # the labels too: CPUs 0, 1 and CPUs 0, 2 are other captures


def test_with_instances_refuses_what_does_not_fit():
    from perfonto.metrics.catalog import load_catalog
    from perfonto.ontology.derive import DeriveError, with_instances

    gen = load_catalog(LINUX, None, library=False).generation
    with pytest.raises(DeriveError, match="needs at least one instance"):
        with_instances(gen, {"cpu": ()})
    with pytest.raises(DeriveError, match="no instance axis `core`"):
        with_instances(gen, {"cpu": ("0",), "core": ("0",)})


@pytest.mark.parametrize("target", ["c-header", "python", "collector"])
def test_codegen_of_a_fixed_size_refuses_saying_why(capsys, tmp_path, target):
    code = main(["codegen", "--target", target, "--catalog", LINUX, "--no-library", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1 and "`task.cpu` of `linux` are sized by the data (`from_data`)" in " ".join(err.split())
    assert main(["codegen", "--target", "docs", "--catalog", LINUX, "--no-library", "--out", str(tmp_path)]) == 0
    assert "cpu: from the data" in (tmp_path / "linux.md").read_text()


def test_slots_on_a_from_data_axis_is_an_error(tmp_path, capsys):
    text = (resources.files("perfonto").joinpath("catalogs", "linux", "linux.yaml")).read_text()
    text = text.replace("    instances: {cpu: from_data}", "    instances: {cpu: from_data}\n    slots: {cpu: [0]}")
    (tmp_path / "linux.yaml").write_text(text)
    assert main(["check", "--catalog", str(tmp_path), "--no-library"]) != 0
    out = capsys.readouterr()
    assert "`slots` names axis `cpu`, whose size comes from the data" in " ".join((out.out + out.err).split())


def test_no_instance_in_the_data_is_an_error_naming_the_file(capsys, tmp_path):
    d = tmp_path / "scrapes"
    d.mkdir()
    for k in range(2):  # node_exporter scrapes without the CPU collector: no node_cpu_seconds_total at all
        (d / f"{1764650000 + k}.prom").write_text(f"# TYPE node_load1 gauge\nnode_load1 {k}.5\n")
    code, doc = analyze(capsys, d, tmp_path / "o", "--format", "openmetrics")
    assert code == 1 and str(d) in doc["error"]
    assert "no instance of the axis `cpu`, whose size comes from the data" in doc["error"]
    # series of the signals without the label that gives the instances
    for k in range(2):
        (d / f"{1764650000 + k}.prom").write_text(
            '# TYPE node_cpu_seconds_total counter\nnode_cpu_seconds_total{mode="idle"} %d\n' % k
        )
    code, doc = analyze(capsys, d, tmp_path / "o2", "--format", "openmetrics")
    assert code == 1 and str(d) in doc["error"] and "has no `cpu` label" in doc["error"]
    # a collector dump with no column of the axis' signals
    csv = tmp_path / "c.csv"
    csv.write_text("chip,timestamp_ns,other\n0,0,1\n0,100,2\n")
    code, doc = analyze(capsys, csv, tmp_path / "o3", "--format", "collector", "--catalog", LINUX, "--no-library")
    assert code == 1 and str(csv) in doc["error"] and "no column of a signal on the instance axis `cpu`" in doc["error"]


def test_a_collector_dump_sizes_the_axis_by_its_per_instance_columns(capsys, tmp_path):
    csv = tmp_path / "c.csv"
    csv.write_text(
        "chip,timestamp_ns,task.clock[0],task.clock[1],task.clock[2]\n"
        "0,0,0,0,0\n"
        "0,1000000000,250000000,500000000,1000000000\n"
    )
    code, doc = analyze(capsys, csv, tmp_path / "o", "--format", "collector", "--catalog", LINUX, "--no-library")
    assert code == 0 and "cpu: 3 instances from the data (0, 1, 2)" in doc["notes"]
    # 0.25, 0.5 and 1 s of task-clock in 1 s; the machine 1.75 CPUs
    assert doc["metrics"]["cpu.utilized"]["value"] == pytest.approx([0.25, 0.5, 1.0], rel=1e-12)
    assert doc["metrics"]["cpus_utilized"]["value"] == pytest.approx(1.75, rel=1e-12)


def test_the_api_sizes_the_catalog_for_the_capture(tmp_path):
    import perfonto

    csv = tmp_path / "c.csv"
    csv.write_text("chip,timestamp_ns,task.clock[0],task.clock[1]\n0,0,0,0\n0,2000000000,500000000,1500000000\n")
    cat = perfonto.load_catalog(LINUX, library=False)
    assert cat.signals["task.clock"].axes == (("cpu", 1),)  # the placeholder until a capture sizes it
    r = perfonto.evaluate(cat, csv)
    # 0.5 s and 1.5 s of task-clock over 2 s; the machine 1 CPU
    assert r.value("cpu.utilized") == pytest.approx([0.25, 0.75], rel=1e-12)
    assert r.value("cpus_utilized") == pytest.approx(1.0, rel=1e-12)


def test_signals_on_and_off_a_from_data_axis_in_one_capture_are_refused():
    import dataclasses

    from perfonto.capture.dump_io import DumpError
    from perfonto.capture.instances import axis_of
    from perfonto.metrics.catalog import load_catalog

    gen = load_catalog(NODE, None, library=False).generation
    assert axis_of(gen, ["cpu.user", "cpu.idle"], "s.prom") == ("cpu", None)  # one axis, not sized yet
    sized = load_catalog(NODE, None, library=False, instances={"cpu": ("0", "3")}).generation
    assert axis_of(sized, ["cpu.user"], "s.prom") == ("cpu", ("0", "3"))
    assert axis_of(load_catalog(None, "sohu").generation, ["seq.elapsed_cycles"], "x") is None
    # a signal of a block without instances read beside the per-CPU ones: which instance would it be?
    solo = dataclasses.replace(gen.signals["cpu.user"], name="solo.x", block="solo", axes=())
    mixed = dataclasses.replace(
        gen,
        signals={**gen.signals, "solo.x": solo},
        blocks={**gen.blocks, "solo": {"clock": "cpu", "axes": (), "description": "one"}},
    )
    with pytest.raises(
        DumpError, match=r"s\.prom: signal `cpu\.user` lies on the instance axis `cpu`.*`solo\.x` on none"
    ):
        axis_of(mixed, ["cpu.user", "solo.x"], "s.prom")


def test_hosts_with_other_cpus_share_the_axis_with_a_note(capsys, tmp_path):
    d = tmp_path / "scrapes"
    d.mkdir()
    for k in range(2):
        big = _scrape({c: {"idle": 1.0 + k, "user": 1.0 + k} for c in range(3)}).replace("{cpu", '{instance="big",cpu')
        small = _scrape({0: {"idle": 1.0 + 2 * k}}).replace("{cpu", '{instance="small",cpu')
        (d / f"{1764650000 + k}.prom").write_text(big + small.split("counter\n", 1)[1])
    code, doc = analyze(capsys, d, tmp_path / "o")
    assert code == 0 and "cpu: 3 instances from the data (0, 1, 2)" in doc["notes"]
    note = [n for n in doc["notes"] if "has no series for cpu 1, 2 in any scrape" in n]
    assert note and "'small'" in note[0]
    per_host = {r["host"]: r["metrics"]["busy_share"] for r in doc["per_chip"]}
    assert per_host["big"] == pytest.approx(0.5, abs=1e-12) and per_host["small"] is None  # 1 s user of 2 s


def test_instance_labels_sort_numerically_without_int_conversion():
    """CPU labels 0, 2, 10 sort as numbers; a label of 5,001 digits (found by the perf-stat fuzzer: int() refuses
    strings over 4,300 digits) sorts last instead of crashing; non-ASCII digits keep their order of appearance."""
    from perfonto.capture.instances import ordered_labels

    assert ordered_labels(["10", "2", "0", "02"]) == ("0", "02", "2", "10")  # equal values: as text
    big = "9" * 5001
    assert ordered_labels(["3", big, "1"]) == ("1", "3", big)
    assert ordered_labels(["²", "1"]) == ("²", "1")
