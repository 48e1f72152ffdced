"""A trial user's real perf stat captures (session 56, report F): what the readers said wrongly, and a
cycle count added to a copy of the shipped `linux` catalog as the README says.

- A `-x,` CSV written in de_DE (decimal commas: `0,100206995,200,72,msec,…`) was refused for "field 2 or 3
  is a number"; the human-format reader already named the locale. Both now say `LC_ALL=C perf stat`.
- An edited line `0.3,abc,,page-faults,…` was refused for "field 3 (the event name) is empty"; it now names
  the value `abc`, its field and column.
- perf's default events in a VM without a PMU (`cycles`, `instructions`, … `<not supported>` in every
  interval) were listed as "events no signal reads"; they now have a note of their own.
- `cycles` (unit `cpu_cycle`) added to a copy of `linux` gave IPC null in every window, "reset (implausible
  increase or decrease)": the catalog's `cpu` clock was a 1 GHz placeholder, and a cycle count's clock bounds
  it (``ontology.rates.max_rate``), so a 3 GHz CPU, or two CPUs summed by `perf stat -a`, passed it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from perfonto.capture.dump_io import DumpError
from perfonto.capture.perf_stat import collector_table, read_perf_stat
from perfonto.cli import main

import perfonto

LINUX = Path(perfonto.__file__).parent / "catalogs" / "linux"  # the installed package's
MAP = {"task-clock": ("task_clock", "time", 1e9), "page-faults": ("page_faults", "", 1.0)}


def _refused(tmp_path: Path, text: str, name: str = "perf.csv") -> str:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DumpError) as exc:
        collector_table(read_perf_stat(path), MAP)
    return str(exc.value)


@pytest.mark.parametrize(
    "text, line, number",
    [
        # F's bad/comma_x.csv: perf stat -I 100 -x, in de_DE (the time stamp `%3d,%09d`)
        (
            "# started on Sat Dec  5 22:57:24 2026\n\n"
            "     0,100206995,200,72,msec,task-clock,200718236,100,00,2,007,CPUs utilized\n"
            "     0,100206995,83,,page-faults,200719678,100,00,413,513,/sec\n",
            3,
            "0,100206995",
        ),
        # F's bad/comma_semi.csv: -x';' keeps the fields apart, but the time stamp has a decimal comma
        (
            "     0,100206995;200,72;msec;task-clock;200718236;100,00;2,007;CPUs utilized\n",
            1,
            "0,100206995",
        ),
        # without -I, a count line first parses: the next line's field count differs
        (
            "35,,page-faults,200719698,100,00,174,373,/sec\n"
            "200,72,msec,task-clock,200718236,100,00,2,007,CPUs utilized\n",
            2,
            "200,72",
        ),
    ],
)
def test_a_csv_with_decimal_commas_names_the_locale(tmp_path, text, line, number):
    msg = _refused(tmp_path, text)
    assert f"perf.csv:{line}: `{number}`" in msg and "decimal comma" in msg, msg
    assert "LC_ALL=C perf stat" in msg
    assert "is a number where perf stat's CSV has the unit" not in msg and "field(s) where" not in msg


def test_a_decimal_comma_csv_without_its_header_is_still_perfs(tmp_path):
    """perf stat -I -x, (or -x';') in de_DE written without `-o` (no `# started on` line): the sniffer took it
    for a collector dump ("row 1: 11 field(s) where the header has 12 column(s)"); a collector dump, whose first
    line is its header, is not taken for perf's."""
    from perfonto.capture.formats import detect

    rows = {
        "comma_x.csv": "     0,100206995,200,72,msec,task-clock,200718236,100,00,2,007,CPUs utilized\n"
        "     0,100206995,35,,context-switches,200719698,100,00,174,373,/sec\n"
        "     0,100206995,<not supported>,,cycles,0,100,00,,\n",
        "comma_semi.csv": "     0,100206995;200,72;msec;task-clock;200718236;100,00;2,007;CPUs utilized\n"
        "     0,100206995;35;;context-switches;200719698;100,00;174,373;/sec\n",
    }
    for name, text in rows.items():
        path = tmp_path / name
        path.write_text(text)
        assert detect(path) == "perf-stat", name
        assert "LC_ALL=C perf stat" in _refused(tmp_path, text, name)
    dump = tmp_path / "dump.csv"
    dump.write_text("chip,sample,timestamp_ns,task.clock\n0,1,100206995,5\n0,2,200206995,9\n")
    assert detect(dump) != "perf-stat"


def test_a_value_that_is_not_a_number_is_named_with_its_column(tmp_path):
    """F's bad/garbage.csv: `0.3,abc,,page-faults,1,100.00,,` among -I lines. Its time stamp is not perf's
    nine-decimal form, so it was read as a line without one (`0.3` the value, `abc` the unit, an empty event)."""
    text = (
        "     0.100000000,50.00,msec,task-clock,50000000,100.00,0.500,CPUs utilized\n"
        "     0.100000000,83,,page-faults,50000000,100.00,1.660,K/sec\n"
        "0.3,abc,,page-faults,1,100.00,,\n"
    )
    msg = _refused(tmp_path, text)
    assert "perf.csv:3: the count `abc` is not a number (field 2, column 5)" in msg, msg
    assert "`<not counted>`" in msg and "as `perf stat -x, -o FILE` wrote it" in msg
    assert "event name" not in msg


def test_events_not_supported_anywhere_are_noted_apart(tmp_path):
    """F's p_def.csv (perf stat -a -x, -I 200 in a VM): perf's default hardware events are `<not supported>` on
    every line. The note said "perf events no signal reads: branch-misses, …", as if the catalog lacked them."""
    lines = []
    for t in ("0.200252530", "0.404268445"):
        lines += [
            f"     {t},407.90,msec,task-clock,407898174,100.00,2.039,CPUs utilized",
            f"     {t},2199,,page-faults,407903262,100.00,5.391,K/sec",
            f"     {t},3,,major-faults,407903262,100.00,7.3,/sec",
            f"     {t},<not supported>,,cycles,0,100.00,,",
            f"     {t},<not supported>,,instructions,0,100.00,,",
        ]
    path = tmp_path / "p_def.csv"
    path.write_text("\n".join(lines) + "\n")
    notes: list[str] = []
    collector_table(read_perf_stat(path), MAP, notes=notes)
    unsupported = [n for n in notes if "<not supported>` in every interval" in n]
    unread = [n for n in notes if "no signal reads" in n]
    assert len(unsupported) == 1 and unsupported[0].endswith("VM without PMU access): cycles, instructions")
    assert len(unread) == 1 and unread[0].endswith(": major-faults")


def _extended_linux(tmp_path: Path) -> Path:
    """A copy of the shipped `linux` catalog with `cycles` and `instructions` and an IPC metric, as F wrote it
    following the README ("copy its two files into a folder of your own and extend the copy")."""
    cat = tmp_path / "mycat"
    cat.mkdir()
    for f in ("linux.yaml", "linux.metrics"):
        shutil.copy(LINUX / f, cat / f)
    yaml_text = (cat / "linux.yaml").read_text()
    anchor = "        sources: {perf: page-faults}\n"
    added = (
        "      cycles:\n        kind: counter\n        unit: cpu_cycle\n        width: 64\n"
        '        description: "cycles"\n        sources: {perf: cycles}\n'
        "      instructions:\n        kind: counter\n        unit: instruction\n        width: 64\n"
        '        description: "instructions"\n        sources: {perf: instructions}\n'
    )
    assert anchor in yaml_text
    (cat / "linux.yaml").write_text(yaml_text.replace(anchor, anchor + added))
    with open(cat / "linux.metrics", "a") as fh:
        fh.write(
            "\nmetric ipc [instruction/cpu_cycle] = sum(task.instructions) / sum(task.cycles)\n"
            "  \"Instructions per cycle (perf stat's 'insn per cycle').\"\n  groups cpu\n"
            '  source "perf stat"\n'
        )
    return cat


# (cycles, instructions) per interval of 100 ms; -a: two CPUs at 3 GHz summed (6e8 cycles in 0.1 s, six times
# the old 1 GHz bound); -A: each CPU at 3 GHz, three times it
AGGREGATED = [(600_000_000, 900_000_000), (580_000_000, 600_000_000), (610_000_000, 1_200_000_000)]
PER_CPU = {
    "CPU0": [(300_000_000, 450_000_000), (290_000_000, 300_000_000), (305_000_000, 600_000_000)],
    "CPU1": [(300_000_000, 150_000_000), (290_000_000, 290_000_000), (305_000_000, 305_000_000)],
}


def _capture(path: Path, per_where: dict[str, list[tuple[int, int]]]) -> Path:
    out = []
    for k in range(3):
        t = f"{0.1 * (k + 1):.9f}"
        for where, rows in per_where.items():
            w = f"{where}," if where else ""
            cyc, ins = rows[k]
            out += [
                f"     {t},{w}100.00,msec,task-clock,100000000,100.00,1.000,CPUs utilized",
                f"     {t},{w}{cyc},,cycles,100000000,100.00,3.000,GHz",
                f"     {t},{w}{ins},,instructions,100000000,100.00,1.00,insn per cycle",
            ]
    path.write_text("\n".join(out) + "\n")
    return path


@pytest.mark.parametrize("per_where", [{"": AGGREGATED}, PER_CPU], ids=["aggregated -a", "per CPU -A"])
def test_cycles_added_to_a_copy_of_linux_give_ipc(tmp_path, capsys, per_where):
    """IPC = Σinstructions / Σcycles. Aggregated: 2.7e9 / 1.79e9 = 1.5083799; per window 900/600 = 1.5,
    600/580 = 1.0344828, 1200/610 = 1.9672131. Per CPU the same sums (CPU0 + CPU1 per interval: 600, 580,
    610 M cycles; 600, 590, 905 M instructions): 2.095e9 / 1.79e9 = 1.1703911; windows 1.0, 590/580 =
    1.0172414, 905/610 = 1.4836066. The old catalog's 1 GHz `cpu` clock nulled every window."""
    cat = _extended_linux(tmp_path)
    csv = _capture(tmp_path / "p_hw.csv", per_where)
    out = tmp_path / "out"
    args = ["analyze", str(csv), "--format", "perf-stat", "--catalog", str(cat), "--out", str(out), "--json"]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    rows = list(per_where.values())
    cycles = [sum(r[k][0] for r in rows) for k in range(3)]
    instr = [sum(r[k][1] for r in rows) for k in range(3)]
    want = 2.7e9 / 1.79e9 if len(rows) == 1 else 2.095e9 / 1.79e9
    assert sum(instr) / sum(cycles) == pytest.approx(want, rel=1e-12)
    assert report["metrics"]["ipc"]["value"] == pytest.approx(want, rel=1e-9)
    windows = pq.read_table(out / "metrics.parquet").column("ipc").to_pylist()
    by_hand = [1.5, 600 / 580, 1200 / 610] if len(rows) == 1 else [1.0, 590 / 580, 905 / 610]
    assert windows == pytest.approx(by_hand, rel=1e-9)


def test_the_catalogs_cpu_clock_bounds_no_real_cycle_count(tmp_path):
    """In the extended copy a count in `cpu_cycle` may grow at the clock × 1.01 (``rates.max_rate``): 1.01e9/s
    with the old 1 GHz placeholder, below one 3 GHz CPU; now 1.01e13/s, above 2,000 CPUs at 5 GHz summed by
    perf -a. `node`'s clock bounds one CPU's count: 1.01e10/s, above any CPU's clock. No shipped metric reads
    either clock as a time (`spec.clock.cpu`)."""
    from perfonto.ontology.loader import load_generation, load_generation_files
    from perfonto.ontology.rates import max_rate

    cat = _extended_linux(tmp_path)
    gen, diags = load_generation_files(sorted(cat.glob("*.yaml")), "linux")
    assert gen is not None, diags
    assert max_rate(gen, gen.signals["task.cycles"]) == pytest.approx(10e12 * 1.01)
    assert max_rate(gen, gen.signals["task.cycles"]) > 2000 * 5e9
    node, diags = load_generation(LINUX.parent / "node" / "node.yaml")
    assert node is not None, diags
    clock = node.clock_domains["cpu"]
    assert node.registry.Quantity(clock.value, clock.unit).to("cpu_cycle/s").magnitude == pytest.approx(10e9)
    for name in ("linux", "node"):
        assert "spec.clock" not in (LINUX.parent / name / f"{name}.metrics").read_text()


def test_an_unknown_cycle_unit_offers_the_domains_cycle():
    """`unit: cycle` was refused with "unknown unit 'cycle'" and no word of `cpu_cycle`."""
    from perfonto.ontology.units import UnitError, parse_unit, registry_for

    reg = registry_for(("cpu",))
    with pytest.raises(UnitError, match=r"unknown unit 'cycle'.*did you mean `cpu_cycle`\?"):
        parse_unit(reg, "cycle")
    with pytest.raises(UnitError, match=r"did you mean `cpu_cycle`\?"):
        parse_unit(reg, "instruction/cycles")
    with pytest.raises(UnitError, match=r"did you mean `instruction`"):
        parse_unit(reg, "instrucion")
