"""perf stat's human-readable report as perf wrote it in another locale, twice into one file, or with -r
(capture/perf_stat.py). The fixtures were written by perf 6.1 on the development machine:

- perf-stat-de-interval.txt: `LOCPATH=… LC_ALL=de_DE.UTF-8 perf stat -I 200 -e task-clock,page-faults -- python3 …`
- perf-stat-de-elapsed.txt: `LC_ALL=de_DE.UTF-8 perf stat -e context-switches,cpu-migrations -- sleep 0.6`
- perf-stat-grouped.txt: `LC_ALL=en_US.UTF-8 perf stat -e duration_time,task-clock,page-faults -- python3 …`
- perf-stat-append.txt: `perf stat --append -o FILE …` twice (`sleep 0.05`, then `python3 -c x=[0]*10**6`)
- perf-stat-repeat.txt: `perf stat -r 3 -e task-clock,page-faults -- sleep 0.05`
- perf-stat-de-semicolon-interval.csv / perf-stat-semicolon-interval.csv: `LC_ALL=de_DE.UTF-8` / `LC_ALL=C
  perf stat -x';' -I 200 -e task-clock,page-faults -o FILE -- python3 -c "x=[0]*10**7; import time; time.sleep(0.3)"`
- perf-stat-de-semicolon.csv: `LC_ALL=de_DE.UTF-8 perf stat -x';' -e task-clock,page-faults,duration_time -o FILE
  -- python3 -c "x=[0]*10**7"`

The expected values are the numbers perf printed, worked by hand."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from perfonto.capture.dump_io import DumpError
from perfonto.capture.perf_stat import collector_table, read_perf_stat

FIX = Path(__file__).parent / "fixtures" / "perf"
MAP = {
    "task-clock": ("task_clock", "time", 1e9),
    "page-faults": ("page_faults", "", 1.0),
    "context-switches": ("context_switches", "", 1.0),
}


def _refused(path: Path) -> str:
    with pytest.raises(DumpError) as exc:
        collector_table(read_perf_stat(path), MAP)
    return str(exc.value)


def _report(path: Path, command: str, lines: list[str], elapsed: str = "1.001234567") -> Path:
    """``path`` written as perf stat's report of ``command``: its header, ``lines`` (one counter each, as
    perf aligns them), and the elapsed-time footer."""
    body = "".join(f"{ln}\n" for ln in lines)
    path.write_text(f" Performance counter stats for '{command}':\n\n{body}\n       {elapsed} seconds time elapsed\n")
    return path


def test_a_decimal_comma_is_refused_with_the_locale_hint():
    """de_DE's `187,21 msec task-clock` at 0.203841357 s was read as 18721 msec: 91.8 CPUs utilized
    (18.721 s / 0.2038 s) where perf printed 0,936."""
    msg = _refused(FIX / "perf-stat-de-interval.txt")
    assert "perf-stat-de-interval.txt:4:" in msg and "`187,21`" in msg and "`task-clock`" in msg
    assert "LC_ALL=C" in msg


def test_digits_grouped_with_a_dot_are_refused(tmp_path):
    """de_DE's `59.462 page-faults` (59462 faults) was read as 59.462: 1000 times too few. The same file
    without its task-clock lines (refused first, on the decimal comma) is refused on the page faults."""
    text = (FIX / "perf-stat-de-interval.txt").read_text().splitlines()
    path = tmp_path / "faults.txt"
    path.write_text("\n".join(ln for ln in text if "task-clock" not in ln) + "\n")
    msg = _refused(path)
    assert "faults.txt:4:" in msg and "`59.462`" in msg and "whole number" in msg and "LC_ALL=C" in msg


def test_an_elapsed_time_with_a_decimal_comma_names_the_locale():
    """A de_DE report of small whole counts (1 switch, 0 migrations: the same in any locale) has only its
    elapsed time to show the locale, `0,601457843`; refused before too, but as "not a number"."""
    msg = _refused(FIX / "perf-stat-de-elapsed.txt")
    assert "perf-stat-de-elapsed.txt:9:" in msg and "`0,601457843`" in msg and "LC_ALL=C" in msg


@pytest.mark.parametrize(
    "value, event, before",
    [
        ("1,23,456", "page-faults", "123456, en_IN's grouping"),
        ("1234,567", "page-faults", "1234567"),
        ("12,3456", "page-faults", "123456"),
        ("1.234.567", "page-faults", "not a number, without the hint"),
        ("1.234,56 msec", "task-clock", "123456 msec"),
        ("86.743", "page-faults", "86.743 faults"),
    ],
)
def test_values_not_in_the_c_locales_form_name_line_and_value(tmp_path, value, event, before):
    path = _report(tmp_path / "report.txt", "true", [f"          {value}      {event}"], "0.002071073")
    msg = _refused(path)
    assert "report.txt:3: " in msg and f"`{value.split()[0]}`" in msg and "LC_ALL=C" in msg, before


def test_the_c_locales_groups_and_units_are_read():
    """en_US groups digits with ',' in threes (the C locale prints none): 322.11 msec and 68,150 faults over
    0.329000561 s; perf printed 0.979 CPUs utilized (322.11 / 329.000561 = 0.97906) and 211.574 K/sec
    (68150 / 0.32211 s = 211573.7). `329,000,561 ns duration_time` was read as the event `ns`."""
    ps = read_perf_stat(FIX / "perf-stat-grouped.txt")
    assert [(x.event, x.unit, x.value) for x in ps.lines] == [
        ("duration_time", "ns", 329_000_561.0),
        ("task-clock", "msec", 322.11),
        ("page-faults", "", 68_150.0),
    ]
    t = collector_table(ps, MAP).to_pydict()
    assert t["task_clock"] == [0, 322_110_000] and t["page_faults"] == [0, 68_150]
    assert t["task_clock"][1] / 1e9 / ps.elapsed_s == pytest.approx(0.97906, abs=5e-6)


def test_the_cli_gives_perfs_cpus_utilized_for_a_grouped_report(tmp_path, capsys):
    from perfonto.cli import main

    path = FIX / "perf-stat-grouped.txt"
    assert main(["analyze", str(path), "--format", "perf-stat", "--out", str(tmp_path / "o"), "--json"]) == 0
    got = {k: v["value"] for k, v in json.loads(capsys.readouterr().out)["metrics"].items()}
    assert round(got["cpus_utilized"], 3) == 0.979  # perf printed 0.979
    assert got["page_faults.per_second"] == pytest.approx(211_573.7, abs=0.1)  # perf printed 211.574 K/sec


def test_units_between_value_and_event_and_perf_4s_unit_after_it(tmp_path):
    """A fraction with a unit is no locale sign (`1.23 Joules power/energy-pkg/`, read as the event `Joules`
    before); perf before 5.x printed `0.643545  task-clock (msec)`, read as a count before (a time signal
    refused it)."""
    lines = [
        "              1.23 Joules power/energy-pkg/",
        "          0.643545      task-clock (msec)         #    0.001 CPUs utilized",
        "                 1      context-switches          #    0.002 M/sec",
    ]
    path = _report(tmp_path / "report.txt", "sleep 1", lines)
    ps = read_perf_stat(path)
    assert [(x.event, x.unit, x.value) for x in ps.lines] == [
        ("power/energy-pkg/", "Joules", 1.23),
        ("task-clock", "msec", 0.643545),
        ("context-switches", "", 1.0),
    ]
    assert collector_table(ps, MAP).to_pydict()["task_clock"] == [0, 643_545]  # 0.643545 msec in ns


def test_two_runs_appended_to_one_file_are_refused(tmp_path):
    """`perf stat --append`: the first run's 0.70 msec was read under the second run's 0.087334969 s,
    0.008 CPUs utilized (0.70 / 87.334969), where perf printed 0.014 and 0.929 for the two runs."""
    msg = _refused(FIX / "perf-stat-append.txt")
    assert "perf-stat-append.txt:18: a second run's report starts here (the first starts on line 4)" in msg
    assert "one run per file" in msg
    # a second elapsed time without its header (the file edited) is a second run too
    text = (FIX / "perf-stat-append.txt").read_text().splitlines()
    path = tmp_path / "edited.txt"
    path.write_text("\n".join(text[:12] + ["       0.087334969 seconds time elapsed"]) + "\n")
    assert "edited.txt:13: a second run's elapsed time here" in _refused(path)


def test_repeat_output_is_refused_as_means_over_runs(tmp_path):
    """`perf stat -r 3` prints means (`0.0514069 +- 0.0000684 seconds time elapsed`): it was refused as
    "no 'seconds time elapsed' line: the report is cut short", which is false."""
    msg = _refused(FIX / "perf-stat-repeat.txt")
    assert "perf-stat-repeat.txt:4: `perf stat -r`/`--repeat` output (3 runs)" in msg and "without -r" in msg
    # perf 6.1's `-r 2 -I 100`: the last interval carries the spread
    path = tmp_path / "repeat-interval.txt"
    path.write_text(
        "#           time             counts unit events\n"
        "     0.100159465               0.76 msec task-clock     #    0.008 CPUs utilized\n"
        "     0.251681914               0.06 msec task-clock     #    0.001 CPUs utilized    ( +-375.79% )\n"
    )
    assert re.search(r"repeat-interval\.txt:3: `perf stat -r`/`--repeat` output", _refused(path))


def test_a_decimal_comma_in_json_is_refused(tmp_path):
    """perf -j in de_DE writes `"counter-value" : "90,979971"` (90.98 msec); its digit-group stripping read
    it as 90979971 msec."""
    path = tmp_path / "perf.json"
    path.write_text(
        '{"interval" : 0.200259030, "counter-value" : "90,979971", "unit" : "msec", "event" : "task-clock"}\n'
    )
    msg = _refused(path)
    assert "perf.json:1: the count `90,979971` has a decimal comma" in msg and "LC_ALL=C" in msg


def test_a_cgroup_after_the_event_is_not_read_as_a_unit(tmp_path):
    """`perf stat -G web` prints the cgroup after the event: `1,234,567  cycles  web`. A reader that took
    any word between value and event as a unit read `cycles` as the unit of an event `web` (a review);
    only the units sysfs gives events (Joules, MiB, ns …) are units."""
    lines = [
        "         1,234,567      cycles                           web",
        "           234,567      instructions                     web",
        "              1.23 Joules power/energy-pkg/",
    ]
    p = _report(tmp_path / "g.txt", "system wide", lines)
    ps = read_perf_stat(p)
    assert [(x.event, x.value, x.unit) for x in ps.lines] == [
        ("cycles", 1234567.0, ""),
        ("instructions", 234567.0, ""),
        ("power/energy-pkg/", 1.23, "Joules"),
    ]


@pytest.mark.parametrize(
    "name, line, value",
    [("perf-stat-de-semicolon-interval.csv", 3, "107,20"), ("perf-stat-de-semicolon.csv", 3, "152,95")],
)
def test_a_semicolon_csv_in_de_de_is_perfs_and_names_the_locale(name, line, value):
    """`-x';'` is what a de_DE user picks to keep perf's decimal commas out of the separator; the line
    `0.200241885;107,20;msec;task-clock;…` was split at its commas (the count `0.200241885;107` "is not a
    number"), and without -I the file was not recognised as perf's at all (a generic CSV error)."""
    from perfonto.capture.formats import detect

    path = FIX / name
    assert detect(path) == "perf-stat"
    msg = _refused(path)
    assert f"{path}:{line}: the count `{value}` has a decimal comma" in msg and "LC_ALL=C perf stat" in msg


def test_a_semicolon_csv_in_the_c_locale_is_read(tmp_path, capsys):
    """The same run in the C locale: the printed 118.95 msec of task-clock over the first interval's
    0.200349175 s is 0.593713 CPUs (perf printed 0.595: it divides by the nominal 200 ms), 28,051 page faults
    over that task-clock 235,821.8 /s (perf printed 235.819 K/sec from its unrounded count); the second interval is
    `<not counted>` with a run time of 0 (never enabled): 0 CPUs, no fault rate."""
    from perfonto.capture.formats import detect
    from perfonto.cli import main

    path = FIX / "perf-stat-semicolon-interval.csv"
    assert detect(path) == "perf-stat"
    assert main(["analyze", str(path), "--out", str(tmp_path / "o")]) == 0
    capsys.readouterr()
    import pyarrow.parquet as pq

    t = pq.read_table(tmp_path / "o" / "metrics.parquet").to_pydict()
    assert t["cpus_utilized"][:2] == pytest.approx([0.11895 / 0.200349175, 0.0], rel=1e-9)
    assert t["page_faults.per_second"][0] == pytest.approx(28051 / 0.11895, rel=1e-9)
    assert t["page_faults.per_second"][1] is None
