"""Tables of the perf importer (``interop.perf``): the arm64 architecture-standard top-down metrics, the
assumed values of perf's ``#literal`` machine values, the translation notes of the import report, and the
reading of architecture-standard files (``--arch-std``)."""

from __future__ import annotations

from pathlib import Path

from .source_io import load_json

# arm64 architecture-standard top-down metrics: tools/perf/pmu-events/arch/arm64/sbsa.json at
# torvalds/linux 602bf18307981f3bfd9ebf19921791a4256d3fd1 (formulas and fields; descriptions ours).
ARM64_SBSA = {
    "frontend_bound": {
        "MetricName": "frontend_bound",
        "MetricExpr": "stall_slot_frontend / (#slots * cpu_cycles)",
        "MetricGroup": "Default;TopdownL1",
        "ScaleUnit": "100%",
        "BriefDescription": "Share of issue slots stalled by the frontend (top-down level 1)",
    },
    "bad_speculation": {
        "MetricName": "bad_speculation",
        "MetricExpr": "(1 - op_retired / op_spec) * (1 - stall_slot / (#slots * cpu_cycles))",
        "MetricGroup": "Default;TopdownL1",
        "ScaleUnit": "100%",
        "BriefDescription": "Share of issue slots spent on operations that did not retire (top-down level 1)",
    },
    "retiring": {
        "MetricName": "retiring",
        "MetricExpr": "(op_retired / op_spec) * (1 - stall_slot / (#slots * cpu_cycles))",
        "MetricGroup": "Default;TopdownL1",
        "ScaleUnit": "100%",
        "BriefDescription": "Share of issue slots that retired operations (top-down level 1)",
    },
    "backend_bound": {
        "MetricName": "backend_bound",
        "MetricExpr": "stall_slot_backend / (#slots * cpu_cycles)",
        "MetricGroup": "Default;TopdownL1",
        "ScaleUnit": "100%",
        "BriefDescription": "Share of issue slots stalled by the backend (top-down level 1)",
    },
}

LITERAL_DEFAULTS = {
    "slots": (
        5.0,
        "issue slots per cycle; perf reads the PMU's caps/slots. 5 as on Neoverse N2, which this file's formulas "
        "special-case",
    ),
    "smt_on": (1.0, "1 when SMT is on; perf reads it from sysfs"),
    "core_wide": (1.0, "1 when events count for the whole core"),
    "num_cpus": (8.0, "CPUs of the machine"),
    "num_cpus_online": (8.0, "online CPUs"),
    "num_cores": (8.0, "cores"),
    "num_dies": (1.0, "dies"),
    "num_packages": (1.0, "packages (sockets)"),
    "system_tsc_freq": (2.5e9, "TSC frequency in Hz"),
}

TRANSLATIONS = [
    "perf `/` by zero gives NaN; perfonto's `/` gives null: same meaning, kept as `/`",
    "perf `d_ratio(a, b)` is 0 when b is 0: written `a / b if b != 0 else 0`",
    "perf `a if c else b` takes b only when c is exactly 0: written `a if c != 0 else b` (a NaN condition takes a in "
    "perf, null in perfonto)",
    "perf `<`, `>` give 1/0 and `&`, `|`, `^` are logical: written as comparisons and `and`/`or`, `1 if … else 0` "
    "where used as numbers",
    "perf `#literal`s are machine values: dimensionless `spec.*` constants with assumed values (listed under "
    "`constants assumed`; `--constant NAME=VALUE` gives one)",
    "perf `duration_time` (seconds) is `interval`",
    "perf metric references use the referenced metric's unscaled value: a reference to a rescaled metric is divided "
    "back",
    "ScaleUnit `<scale><unit>`: the declared unit is the label's pint unit and the value stays expression × scale",
    "MetricThreshold compares unscaled values: the bound is multiplied by the scale; with ancestor conjuncts it is "
    "written `threshold … when parent` (crossed only where its parents' are crossed too)",
    "events are counters with unit `event` and width 64 (the metrics file defines neither), unless the file defines "
    "them with perfonto's tag (its own export): then with their unit, scale, width, instances and kind",
    "perf's top-down levels (groups TopdownL1, TopdownL2 …, tma_L1_group …) in percent get group `topdown`: a node "
    "without a parent is perfonto's top-down level 1, and a `<metric>_group` member its child in the drill-down",
    "of perf's top-down level 1, retiring (useful work, not a stall) gets group `useful`, which the dominant "
    "bottleneck is not chosen among; where the file gives only some of the four level-1 categories, each level-1 "
    "node gets group `topdown_partial` and their sum to 100 % is not checked",
    "a perf metric reads an event's raw count (perf reverses the event's ScaleUnit first): a defined event with a "
    "scale is read as its value / scale",
]


def encoding(e: dict) -> str:
    """`` (EventCode 0x3c, UMask 0x2)``: a defined event's encoding for its signal's description, or ""."""
    parts = [f"{k} {e[k]}" for k in ("EventCode", "UMask", "Unit", "ConfigCode") if str(e.get(k) or "").strip()]
    return f" ({', '.join(parts)})" if parts else ""


def load_arch_std(path: str | Path) -> dict[str, dict]:
    """An architecture-standard JSON file (events or metrics) as ``{lower-case name: entry}``."""
    data = load_json(path, "architecture-standard file")
    out = {}
    for e in data if isinstance(data, list) else []:
        if isinstance(e, dict):
            for k in ("MetricName", "EventName"):
                if isinstance(e.get(k), str):
                    out[e[k].lower()] = e
    return out
