"""perf's JSON output (`perf stat -j`) read as a capture (capture/perf_stat.py, issue 27).

The layout is perf's own: one object per line, `"counter-value" : "%f"` or the marker string, then
`unit`, `event`, `event-runtime`, `pcnt-running`, `metric-value`, `metric-unit`, preceded with -I by
`interval` and with -A/--per-socket/… by `cpu` (a number) or `socket`/`die`/`core`/`node`
(torvalds/linux tools/perf/util/stat-display.c, print_counter_value_json and aggr_printout; the keys
and their checks: tools/perf/tests/shell/lib/perf_json_output_lint.py at commit
2c240484cf52da3c2ca14cfb70e8cf9179197ced). The fixtures were written by perf 6.1 on the development
machine (`perf stat -j -I 100 …`, `-A -a`, `--per-socket -a`); expected values are the numbers perf
printed, read off the files by hand."""

from __future__ import annotations

import json
import re

import pytest

from perfonto.capture.dump_io import DumpError
from perfonto.capture.formats import detect
from perfonto.capture.perf_stat import collector_table, read_perf_stat

from test_perf_stat import FIX, MAP, interval_totals  # the CSV tests' fixtures folder, event map and interval check


def test_json_is_recognised_and_increments_become_running_totals():
    assert detect(FIX / "perf-stat-interval.json") == "perf-stat"
    t = interval_totals(FIX / "perf-stat-interval.json", 100, 0.103763521)
    assert t["timestamp_ns"][:3] == [0, 103_763_521, 211_760_086]
    # the first interval: 27.406139 msec, 26 switches, 2267 faults; the second adds 24.273702 msec, 17, 1645
    assert t["task_clock"][:3] == [0, 27_406_139, 27_406_139 + 24_273_702]
    assert t["context_switches"][:3] == [0, 26, 26 + 17]
    assert t["page_faults"][:3] == [0, 2267, 2267 + 1645]
    assert t["cpu_migrations"][4] == 2  # 0, 0, 0, then 2 in the fourth interval


def test_not_counted_in_json_never_enabled_counts_zero_and_loses_no_later_counts():
    """perf printed `<not counted>` for every event in the interval ending at 1.867095707 s (sample 18), each
    with `"event-runtime" : 0, "pcnt-running" : 100.00` (and a metric-value of 0): the per-task counters were
    not enabled there (the task did not run), so the interval adds 0 — not a null (capture.perf_stat,
    "Markers")."""
    t = collector_table(read_perf_stat(FIX / "perf-stat-interval.json"), MAP).to_pydict()
    k = t["timestamp_ns"].index(1_867_095_707)
    assert k == 18 and all(t[s][k] == t[s][k - 1] for s in ("task_clock", "context_switches", "page_faults"))
    # the interval after it adds its own count to the total before it: 23 + 13 switches in those two lines
    assert t["context_switches"][k + 1] - t["context_switches"][k - 1] == 13
    assert t["context_switches"][k - 1] - t["context_switches"][k - 2] == 26


def test_per_cpu_and_per_socket_json():
    t = collector_table(read_perf_stat(FIX / "perf-stat-percpu.json"), MAP).to_pydict()
    assert t["chip"][:4] == [0, 1, 0, 1]
    lines = [json.loads(x) for x in (FIX / "perf-stat-percpu.json").read_text().splitlines() if x.startswith("{")]
    first = {(x["cpu"], x["event"]): float(x["counter-value"]) for x in lines if x["interval"] == lines[0]["interval"]}
    assert t["task_clock"][2:4] == [round(first["0", "task-clock"] * 1e6), round(first["1", "task-clock"] * 1e6)]
    assert t["page_faults"][2:4] == [round(first["0", "page-faults"]), round(first["1", "page-faults"])]
    s = collector_table(read_perf_stat(FIX / "perf-stat-persocket.json"), MAP).to_pydict()
    assert set(s["chip"]) == {0} and s["task_clock"][1] == 284_374_152 and s["page_faults"][1] == 5657  # S0


def _as_json(csv_text: str) -> str:
    """perf's JSON lines for each line of a `perf stat -x,` CSV (print_counter_value_json: "%f" values)."""
    out = []
    for ln in csv_text.splitlines():
        if not ln.strip() or ln.startswith("#"):
            out.append(ln)
            continue
        f = [x.strip() for x in ln.split(",")]
        obj: dict = {"interval": float(f[0])}
        if f[1].startswith("CPU"):
            obj["cpu"] = f[1][3:]
            f = f[:1] + f[2:]
        value = f[1] if f[1].startswith("<") else f"{float(f[1]):f}"
        obj.update({"counter-value": value, "unit": f[2], "event": f[3], "event-runtime": int(f[4])})
        obj.update({"pcnt-running": float(f[5]), "metric-value": float(f[6] or 0), "metric-unit": f[7]})
        out.append(json.dumps(obj, separators=(", ", " : ")))
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("name", ["perf-stat-interval.csv", "perf-stat-percpu.csv"])
def test_json_and_csv_of_one_capture_give_one_table(tmp_path, name):
    csv = FIX / name
    text = csv.read_text()
    lines = text.splitlines()
    k = next(i for i, ln in enumerate(lines) if ",page-faults," in ln and ln.lstrip().startswith("0.2"))
    f = lines[k].split(",")
    f[-7] = "<not counted>"  # a marker too (the value: the seventh field from the end)
    lines[k] = ",".join(f)
    text = "\n".join(lines) + "\n"
    csv = tmp_path / name
    csv.write_text(text)
    js = tmp_path / (name + ".json")
    js.write_text(_as_json(text))
    assert detect(js) == "perf-stat"
    a, b = collector_table(read_perf_stat(csv), MAP), collector_table(read_perf_stat(js), MAP)
    assert a.equals(b) and a.column("page_faults").null_count == 1


def test_not_supported_in_json_is_left_out_with_a_note(tmp_path):
    path = tmp_path / "ns.json"
    rows = [
        {"interval": 0.1, "counter-value": "1.500000", "unit": "msec", "event": "task-clock", "pcnt-running": 100.0},
        {"interval": 0.1, "counter-value": "<not supported>", "unit": "", "event": "cycles", "pcnt-running": 100.0},
        {"metric-value": 0.0, "metric-unit": "frontend cycles idle"},  # a further metric of the event above
        {"interval": 0.2, "counter-value": "2.250000", "unit": "msec", "event": "task-clock", "pcnt-running": 50.0},
        {"interval": 0.2, "counter-value": "<not supported>", "unit": "", "event": "cycles", "pcnt-running": 100.0},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    notes: list[str] = []
    t = collector_table(read_perf_stat(path), {**MAP, "cycles": ("cycles", "", 1.0)}, notes=notes)
    assert "cycles" not in t.column_names and any("not supported" in n and "cycles" in n for n in notes)
    assert t.column("task_clock").to_pylist() == [0, 1_500_000, 3_750_000]


@pytest.mark.parametrize(
    "text, error",
    [
        ('{"interval" : 0.1, "counter-value" : "5", "event" : "page-faults"\n', "perf.json:1:66: not a JSON object"),
        (
            '{"interval" : 0.1, "counter-value" : "5", "event" : "page-faults"}\n[1, 2]\n',
            "perf.json:2: a JSON list where",
        ),
        ('{"interval" : 0.1, "counter-value" : "5"}\n', "perf.json:1: no key `event`"),
        ('{"interval" : 0.1, "counter-value" : "seven", "event" : "page-faults"}\n', "the count `seven` is not"),
        ('{"interval" : 0.1, "counter-value" : "-5", "event" : "page-faults"}\n', "the count -5 of `page-faults`"),
        ('{"interval" : 0.1, "counter-value" : [5], "event" : "page-faults"}\n', "key `counter-value` holds a JSON"),
        ('{"interval" : 0.1, "counter-value" : "5", "event" : ""}\n', "key `event` (the event name) is empty"),
        ('{"interval" : 0.1, "cpu" : "x", "counter-value" : "5", "event" : "page-faults"}\n', "key `cpu` is `x`"),
        (
            '{"interval" : 0.1, "counter-value" : "5", "unit" : "12", "event" : "page-faults"}\n',
            "key `unit` `12` is not a unit",
        ),
        (
            '{"interval" : 0.1, "counter-value" : "5", "event" : "page-faults", "pcnt-running" : 250.0}\n',
            "perf.json:1: the run percentage 250.0 is outside 0–100",
        ),
        (
            '{"interval" : 0.1, "counter-value" : "5", "event" : "page-faults"}\n'
            '{"counter-value" : "5", "event" : "page-faults"}\n',
            "perf.json:2: a line without a time stamp among lines with",
        ),
        (
            '{"interval" : 0.1, "counter-value" : "5", "event" : "page-faults"}\n'
            '{"interval" : 0.1, "counter-value" : "6", "event" : "page-faults"}\n',
            "perf.json:2: `page-faults` again at 0.100000000 s (first on line 1)",
        ),
        ('{"counter-value" : "5", "event" : "page-faults"}\n', "the run's elapsed time is unknown"),
    ],
)
def test_bad_json_names_the_line_and_key(tmp_path, text, error):
    path = tmp_path / "perf.json"
    path.write_text(text)
    with pytest.raises(DumpError, match=re.escape(error)):
        collector_table(read_perf_stat(path), MAP)
