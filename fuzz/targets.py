"""Fuzz targets: each reads one input the way perfonto reads a user's file and must end in a result or
in the reader's own clean error — never another exception (a crash), never a hang.

A target is ``(seeds, run, clean)``: ``seeds()`` gives real inputs to mutate (the shipped catalogs,
dumps written here, the importers' formats), ``run(data: bytes)`` reads one input, ``clean`` the
exception types that are a reader's documented refusal. Inputs are bytes; text targets decode them
with ``errors="replace"`` after trying UTF-8, so invalid UTF-8 is exercised too where the reader
reads bytes itself.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
TMP = Path(tempfile.mkdtemp(prefix="perfonto-fuzz-"))
atexit.register(shutil.rmtree, TMP, ignore_errors=True)  # the harness's scratch files, its own folder


@functools.lru_cache(maxsize=1)
def _sohu():
    from perfonto.ontology.loader import load_generation

    gen, _ = load_generation("sohu")
    return gen


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


# --- the metric language ---------------------------------------------------------------------------


def dsl_seeds() -> list[bytes]:
    out = []
    for f in sorted((ROOT / "metrics" / "library").glob("*.metrics")):
        text = f.read_text(encoding="utf-8")
        for chunk in text.split("\nmetric ")[1:]:
            out.append(("metric " + chunk).encode())
    return out


def dsl_run(data: bytes) -> None:
    """Parse and compile one metric file against sohu; every problem must be a diagnostic."""
    from perfonto.metrics.compiler import compile_texts

    g = compile_texts(_sohu(), {"f.metrics": _text(data)})
    for d in g.diagnostics:
        d.render()


# --- generation YAML -------------------------------------------------------------------------------


def yaml_seeds() -> list[bytes]:
    """Small generation files: sohu's head (clocks, a few constants) with one or two of its blocks, and
    the other shipped files whole (YAML is read by a pure-Python parser: small seeds, many inputs)."""
    import yaml

    doc = yaml.safe_load((ROOT / "ontology" / "catalog" / "sohu.yaml").read_text(encoding="utf-8"))
    head = {k: doc[k] for k in ("generation", "description", "clock_domains")}
    head["spec"] = dict(list(doc["spec"].items())[:3])
    names = list(doc["blocks"])
    out = []
    for i in range(0, len(names), 2):
        part = {**head, "blocks": {b: doc["blocks"][b] for b in names[i : i + 2]}}
        if i == 0:
            part["records"] = doc["records"]
        out.append(yaml.safe_dump(part, sort_keys=False).encode())
    out += [f.read_bytes() for f in sorted((ROOT / "ontology" / "catalog").glob("*.yaml")) if f.name != "sohu.yaml"]
    return out + [f.read_bytes() for f in sorted((ROOT / "tests" / "fixtures" / "docs_catalog").glob("*.yaml"))]


def yaml_run(data: bytes) -> None:
    """Read, validate and resolve one generation file (no ``extends``: the chain is not fuzzed here)."""
    from perfonto.ontology.generation import resolve
    from perfonto.ontology.loader import validate_model
    from perfonto.ontology.model import GenerationFile
    from perfonto.ontology.yaml_source import read_yaml

    p = TMP / "g.yaml"
    p.write_bytes(data)
    src = read_yaml(p)
    if src.diagnostics or not isinstance(src.data, dict):
        return
    src.data.pop("extends", None)
    gf = validate_model(src, GenerationFile)
    if gf is not None:
        resolve(gf, src)
    for d in src.diagnostics:
        d.render()


# --- counter dumps ---------------------------------------------------------------------------------

_DUMP_SIGNALS = (
    "seq.elapsed_cycles",
    "mxu.busy_cycles",
    "hbm.read_bytes",
    "power.temperature",
    "power.status",
    "dma.transfer_sizes",
)


def _wide_csv(rng: np.random.Generator, n: int = 5) -> str:
    gen = _sohu()
    cols = ["chip", "timestamp_ns"]
    rows = []
    for name in _DUMP_SIGNALS:
        s = gen.signals[name]
        cols += [name] if s.instances == 1 else [f"{name}[{i}]" for i in range(s.instances)]
    for t in range(n):
        for chip in range(2):
            vals = [str(chip), str(t * 1_000_000 + chip * 7)]
            vals += [str(int(rng.integers(0, 2**32)) * (t + 1)) for _ in cols[2:]]
            rows.append(",".join(vals))
    return ",".join(cols) + "\n" + "\n".join(rows) + "\n"


def _long_csv(rng: np.random.Generator, n: int = 4) -> str:
    """Long rows; every instance of hbm.read_bytes appears (one no row gives is refused), instance 5
    not at t = 1 (a missing sample)."""
    rows = ["chip,timestamp_ns,signal,instance,value"]
    hbm = [("hbm.read_bytes", str(i)) for i in range(_sohu().signals["hbm.read_bytes"].instances)]
    for t in range(n):
        for name, inst in (("seq.elapsed_cycles", ""), *hbm, ("power.temperature", "")):
            if (t, inst) != (1, "5") or name != "hbm.read_bytes":
                rows.append(f"0,{t * 1000},{name},{inst},{int(rng.integers(0, 2**40)) * (t + 1)}")
    return "\n".join(rows) + "\n"


def dump_seeds() -> list[bytes]:
    rng = np.random.default_rng(0)
    return [_wide_csv(rng).encode(), _long_csv(rng).encode(), _wide_csv(rng, 2).encode()]


def dump_run(data: bytes) -> None:
    """Read a CSV dump (wide or long layout) and prepare its windows."""
    from perfonto.metrics.windows import prepare, read_counters

    p = TMP / "d.csv"
    p.write_bytes(data)
    dump = read_counters(p, _sohu())
    prepare(dump, _sohu())


def parquet_seeds() -> list[bytes]:
    """A table description (JSON) the target turns into a Parquet file: columns, types, metadata."""
    base = {
        "meta": {"sample_period_ns": 1_000_000, "collector_format": 1},
        "columns": {
            "chip": ["int32", [0, 0, 1, 1]],
            "timestamp_ns": ["int64", [0, 1_000_000, 0, 1_000_000]],
            "seq.elapsed_cycles": ["uint64", [0, 1_500_000, 5, 1_500_005]],
            "seq.boot_count": ["uint64", [1, 1, 1, 2]],
            "power.energy": ["uint64", [0, 700, 0, 600]],
        },
    }
    long = {
        "meta": {},
        "columns": {
            "chip": ["int64", [0, 0]],
            "timestamp_us": ["float64", [0.0, 1000.0]],
            "signal": ["string", ["seq.steps", "seq.steps"]],
            "instance": ["int64", [None, None]],
            "value": ["uint64", [3, 9]],
        },
    }
    return [json.dumps(base).encode(), json.dumps(long).encode()]


_TYPES = {
    "int8": pa.int8(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "uint8": pa.uint8(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "string": pa.string(),
    "bool": pa.bool_(),
}


def parquet_run(data: bytes) -> None:
    """Build a table from a JSON description (types as named; values that do not fit are skipped as
    an uninteresting input) and read it as a dump, through Parquet and in memory."""
    from perfonto.metrics.windows import prepare, read_counters

    try:
        spec = json.loads(_text(data))
        cols = {}
        for name, (typ, values) in dict(spec["columns"]).items():
            cols[str(name)] = pa.array(list(values), _TYPES[str(typ)])
        table = pa.table(cols)
        meta = spec.get("meta")
        if meta is not None:
            table = table.replace_schema_metadata({b"perfonto": json.dumps(meta).encode()})
    except Exception:  # not a table description: nothing to read
        return
    p = TMP / "d.parquet"
    pq.write_table(table, p)
    for source in (p, table):
        dump = read_counters(source, _sohu())
        prepare(dump, _sohu())


# --- importers -------------------------------------------------------------------------------------


def _real(name: str) -> bytes | None:
    base = os.environ.get("PERFONTO_SHARED_DATA") or str(ROOT.parent / "shared" / "data")
    p = Path(base) / "real-catalogs" / name
    return p.read_bytes() if p.is_file() else None


def _small_json(entries) -> bytes:
    return json.dumps(entries, indent=1).encode()


def perf_seeds() -> list[bytes]:
    out = [
        _small_json(
            [
                {
                    "MetricName": "ipc",
                    "MetricExpr": "inst_retired.any / cpu_cycles",
                    "ScaleUnit": "1per_cycle",
                    "MetricGroup": "Default;TopdownL1",
                    "MetricThreshold": "ipc < 0.5",
                    "BriefDescription": "IPC",
                },
                {
                    "MetricName": "fe",
                    "MetricExpr": "stall_slot_frontend / (#slots * cpu_cycles) if #smt_on else d_ratio(a, b)",
                    "ScaleUnit": "100%",
                    "MetricGroup": "ipc_group",
                },
                {"EventName": "cpu_cycles", "BriefDescription": "cycles", "ScaleUnit": "1cycles"},
                {
                    "MetricName": "spec.peak",
                    "MetricExpr": "5",
                    "ScaleUnit": "1GB/s",
                    "BriefDescription": "peak [assumed: x]",
                },
                # PerPkg: a per-package axis (issue 27), on a metric and on an event definition
                {"MetricName": "df", "MetricExpr": "dram_0 + dram_1 / source_count(dram_1)", "PerPkg": "1"},
                {"EventName": "l3_hit", "Unit": "L3PMC", "PerPkg": "1", "BriefDescription": "L3 hits"},
                {"MetricName": "l3", "MetricExpr": "l3_hit / duration_time", "ScaleUnit": "3e-5MiB"},
            ]
        )
    ]
    for name in ("perf_arm64_neoverse-n2-v2_metrics.json", "perf_x86_amdzen3_recommended.json"):
        real = _real(name)
        if real:
            doc = json.loads(real)
            out += [_small_json(doc[i : i + 6]) for i in range(0, len(doc), 6)]
    return out


def intel_seeds() -> list[bytes]:
    out = [
        _small_json(
            {
                "Metrics": [
                    {
                        "MetricName": "ipc",
                        "LegacyName": "metric_IPC",
                        "Formula": "a / b",
                        "Events": [
                            {"Name": "INST_RETIRED.ANY", "Alias": "a"},
                            {"Name": "CPU_CLK_UNHALTED.THREAD", "Alias": "b"},
                        ],
                        "Constants": [],
                        "Category": "TMA",
                        "Threshold": {"Formula": "a < 1", "ThresholdIssues": ""},
                        "ResolutionLevels": "THREAD",
                        "UnitOfMeasure": "per cycle",
                        "BriefDescription": "IPC",
                    }
                ]
            }
        )
    ]
    real = _real("intel_perfmon_HSW_haswell_metrics.json")
    if real:
        doc = json.loads(real)
        ms = doc.get("Metrics", []) if isinstance(doc, dict) else []
        out += [_small_json({**doc, "Metrics": ms[i : i + 4]}) for i in range(0, len(ms), 4)]
    return out


def arm_seeds() -> list[bytes]:
    out = [
        _small_json(
            {
                "events": {
                    "CPU_CYCLES": {"code": "0x11", "title": "cycles", "description": "c"},
                    "INST_RETIRED": {"code": "0x08", "title": "inst", "description": "i"},
                },
                "metrics": {
                    "ipc": {
                        "formula": "INST_RETIRED / CPU_CYCLES",
                        "title": "IPC",
                        "units": "per cycle",
                        "description": "IPC",
                        "events": ["INST_RETIRED", "CPU_CYCLES"],
                    }
                },
            }
        )
    ]
    real = _real("arm_telemetry_neoverse-n1.json")
    if real:
        doc = json.loads(real)
        names = sorted(doc.get("metrics", {}))
        for i in range(0, len(names), 5):
            out.append(_small_json({**doc, "metrics": {k: doc["metrics"][k] for k in names[i : i + 5]}}))
    return out


def rocprof_seeds() -> list[bytes]:
    out = [
        b"""SQ_WAVES:
  architectures:
    gfx942/gfx941:
      block: SQ
      event: 4
  description: Waves.
GRBM_COUNT:
  architectures:
    gfx942/gfx941:
      block: GRBM
      event: 0
  description: Clocks.
MeanWaves:
  architectures:
    gfx942/gfx941:
      expression: reduce(SQ_WAVES,sum)/reduce(GRBM_COUNT,max)*100
  description: "Mean waves. Unit: percent"
"""
    ]
    real = _real("rocprofiler-sdk_counter_defs.yaml")
    if real:  # a few counters at a time: base counters and the expressions over them
        import re

        entries = re.split(r"\n(?=[A-Za-z_])", real.decode("utf-8"))
        out += ["\n".join(entries[i : i + 5]).encode() for i in range(0, min(len(entries), 200), 5)]
    return out


def _importer(fmt: str, suffix: str):
    def run(data: bytes) -> None:
        from perfonto.interop import arm, intel, perf, rocprof

        p = TMP / f"src.{suffix}"
        p.write_bytes(data)
        if fmt == "perf":
            perf.read(p, "g")
        elif fmt == "intel":
            intel.read(p, "g")
        elif fmt == "arm":
            arm.read(p, "g")
        else:
            rocprof.read(p, "g")

    run.__doc__ = f"Read a {fmt} catalog into a SourceCatalog (formulas parsed and translated)."
    return run


def formula_seeds() -> list[bytes]:
    return (
        [
            b"perf:" + s
            for s in (
                b"a / b if #smt_on else d_ratio(c, duration_time)",
                b"min(x@y@, 2e-3) & ~z > 1 | q ^ w",
                b"(a + b) * -c % 4",
                b"1 - not a < b",
            )
        ]
        + [b"intel:" + s for s in (b"( a >= 10 & b != 2 ) | c == 1", b"a / ( b + c ) * 100 if d else 0")]
        + [
            b"rocprof:" + s
            for s in (
                b"reduce(SQ_WAVES,sum)/reduce(GRBM_COUNT,max,[DIM])",
                b"accumulate(SQ_LEVEL,HIGH_RES)*4",
                b"select(A,[XCC=[0]])",
            )
        ]
    )


def formula_run(data: bytes) -> None:
    """Parse one formula of perf, Intel, Arm or rocprofiler (the flavour is the input's prefix)."""
    from perfonto.interop.exprparse import parse
    from perfonto.interop.rocprof import parse as rparse

    text = _text(data)
    flavour, _, formula = text.partition(":")
    if flavour == "rocprof":
        rparse(formula)
    else:
        parse(formula, flavour if flavour in ("perf", "intel", "arm") else "perf")


# --- other tools' captures (capture/perf_stat.py, openmetrics.py, dcgm_dmon.py, ncu.py, rocprof.py) -----------------


@functools.lru_cache(maxsize=None)
def _shipped(name: str):
    from perfonto.metrics.catalog import load_catalog

    folder = ROOT / "perfonto" / "catalogs" / name
    return load_catalog(folder, None, library=False, cache=False).generation


def perfstat_seeds() -> list[bytes]:
    return [f.read_bytes() for f in sorted((ROOT / "tests" / "fixtures" / "perf").iterdir()) if f.is_file()]


def _capture(module: str, reader: str, file: str, catalog: str, what: str, **options):
    """A target that writes its input (``what``) to ``TMP / file`` and reads it with
    ``perfonto.capture.<module>.<reader>`` against the shipped catalog ``catalog`` (``options`` passed on)."""

    def run(data: bytes) -> None:
        read = getattr(importlib.import_module(f"perfonto.capture.{module}"), reader)
        p = TMP / file
        p.write_bytes(data)
        read(p, _shipped(catalog), [], **options)

    run.__doc__ = f"Read one {what} against the shipped {catalog} catalog (capture/{module}.py)."
    return run


perfstat_run = _capture("perf_stat", "perf_capture", "perf.csv", "linux", "`perf stat` output (CSV or report)")


def openmetrics_seeds() -> list[bytes]:
    fix = ROOT / "tests" / "fixtures"
    return [(fix / "openmetrics" / "node-cpu.om").read_bytes()] + [
        f.read_bytes() for f in sorted((fix / "dcgm-exporter").glob("*.prom"))[:1]
    ]


openmetrics_run = _capture(
    "openmetrics", "openmetrics_capture", "scrapes.om", "node", "file of time-stamped OpenMetrics/Prometheus samples"
)


def _fixtures(folder: str) -> list[bytes]:
    return [f.read_bytes() for f in sorted((ROOT / "tests" / "fixtures" / folder).iterdir()) if f.is_file()]


def dcgm_dmon_seeds() -> list[bytes]:
    return _fixtures("dcgm-dmon")


dcgm_dmon_run = _capture(
    "dcgm_dmon", "dmon_capture", "dmon.txt", "dcgm", "`dcgmi dmon` output", sample_period_ns=100_000_000
)


def ncu_seeds() -> list[bytes]:
    """The hand-made raw page and the two real H200 exports (raw page, details page)."""
    h200 = ROOT / "tests" / "fixtures" / "h200"
    return _fixtures("ncu") + [(h200 / n).read_bytes() for n in ("ncu-details.csv", "ncu-raw.csv")]


ncu_run = _capture("ncu", "ncu_capture", "ncu.csv", "ncu", "`ncu --csv --page raw` export")


def rocprof_csv_seeds() -> list[bytes]:
    return _fixtures("rocprof-csv")


rocprof_csv_run = _capture(
    "rocprof", "rocprof_capture", "counter_collection.csv", "rocprof", "rocprofv3 counter_collection.csv"
)


def paths_seeds() -> list[bytes]:
    return [
        b"../../../../../OUTSIDE",
        b"a/b",
        b"..",
        b".",
        b"h000",
        b"a\x00b",
        "\u00fcn\u00ef c\u00f8d\u00e9".encode(),
        b"x=y%2F",
        b"~",
        b"/etc/passwd",
        b"C:\\Windows",
        b"host=..",
        b"a" * 150,
    ]


def paths_run(data: bytes) -> None:
    """A host name from data as an output folder (``capture.partitions``): one component that cannot
    leave ``--out`` (no separator, NUL, ``.`` or ``..``), that decodes back to the name, and whose
    part file lands inside the output folder; or a clean refusal (too long)."""
    from perfonto.capture.partitions import inside, segment, value

    host = _text(data)  # a capture's strings are UTF-8 (Arrow checks); bytes that are not become U+FFFD
    seg = segment("host", host)
    assert "/" not in seg and "\x00" not in seg and seg not in (".", "..") and len(seg.encode()) <= 200, seg
    assert value(seg.removeprefix("host=")) == host, (seg, host)
    inside(TMP / "out" / seg / "part-00000.parquet", TMP / "out")


def options_seeds() -> list[bytes]:
    return [
        b"acceptance=0.7",
        b"isl=128,2048",
        b"concurrency=1..256:9:log",
        b"rate=0.5",
        b"chips=8",
        b"batch=1..64:4",
        b"spec.hbm.peak_bandwidth=4..16TB/s:7",
        b"draft_tokens=3",
        b"duration=100us",
        b"duration=2.5 s",
        b"model=llama3-70b",
        b"dtype=fp8,bf16",
        b"mapping=tp4-dp2",
    ]


def options_run(data: bytes) -> None:
    """A CLI option value as a user types it: ``--vary NAME=VALUES`` (``whatif.knobs.parse_vary``) or a
    duration (``perfonto.values.duration_s``); refused cleanly or accepted within its rule."""
    import math

    from perfonto.values import WORKLOAD, check_workload, duration_s
    from perfonto.whatif.knobs import parse_vary

    text = _text(data)
    name, _, v = text.partition("=")
    if name == "duration":
        x = duration_s(v)
        assert math.isfinite(x) and 0 < x <= 86_400, x
        return
    knob = parse_vary(text, _sohu())
    assert 0 < len(knob.values) <= 10_000, len(knob.values)
    if knob.name in WORKLOAD:
        for x in knob.values:
            assert check_workload(knob.name, x) == x, (knob.name, x)


_RESULT: list = []


def api_seeds() -> list[bytes]:
    _api_result()  # the catalog, its evaluator and a small result, built once here, outside every input's time limit
    return [
        b"mfu",
        b"topdown.idl",
        b"hbm.read_bytes",
        b"spec.hbm.capacity",
        b"",
        b"seq.elapsed_cycles",
        b"request.ttft",
    ]


def api_run(data: bytes) -> None:
    """A name given to the Python API (``Catalog.explain``, ``Result.value`` and ``Result.unit`` of a small
    capture's result): a value, or a ``KeyError`` whose message names it."""
    cat, res = _api_result()
    name = _text(data)
    for call in (cat.explain, res.value, res.unit):
        try:
            call(name)
        except KeyError as exc:
            assert name[:20] in str(exc.args[0]), (name, exc.args[0])


def _api_result():
    import perfonto

    if not _RESULT:
        cat = perfonto.load_catalog()
        p = TMP / "api.csv"
        p.write_text(
            "chip,timestamp_ns,seq.elapsed_cycles,seq.idle_cycles\n"
            + "".join(f"0,{i * 100_000},{(i + 1) * 1000},{i}\n" for i in range(20))
        )
        _RESULT.append((cat, perfonto.evaluate(cat, str(p))))
    return _RESULT[0]


def _clean():
    from perfonto.interop.exprparse import ParseError
    from perfonto.interop.ir import Unsupported
    from perfonto.capture.dump import DumpError
    from perfonto.capture.partitions import PathEscapeError
    from perfonto.values import ValueRuleError
    from perfonto.whatif.knobs import KnobError

    # the importers' contract is import_file's: a file of the wrong structure is reported as "malformed <format>
    # file (<what>)" — KeyError, TypeError and AttributeError from the reader included; anything else is a crash
    structural = (ValueError, KeyError, TypeError, AttributeError)
    return {
        "dsl": (),
        "yaml": (),
        "dump": (DumpError,),
        "parquet": (DumpError,),
        "perf": structural,
        "intel": structural,
        "arm": structural,
        "rocprof": structural,
        "formula": (ParseError, SyntaxError, Unsupported),
        "perfstat": (DumpError,),
        "openmetrics": (DumpError,),
        "dcgm_dmon": (DumpError,),
        "ncu": (DumpError,),
        "rocprof_csv": (DumpError,),
        "paths": (PathEscapeError,),
        "options": (ValueRuleError, KnobError),
        "api": (KeyError,),
    }


TARGETS = {
    "dsl": (dsl_seeds, dsl_run),
    "yaml": (yaml_seeds, yaml_run),
    "dump": (dump_seeds, dump_run),
    "parquet": (parquet_seeds, parquet_run),
    "perf": (perf_seeds, _importer("perf", "json")),
    "intel": (intel_seeds, _importer("intel", "json")),
    "arm": (arm_seeds, _importer("arm", "json")),
    "rocprof": (rocprof_seeds, _importer("rocprof", "yaml")),
    "formula": (formula_seeds, formula_run),
    "perfstat": (perfstat_seeds, perfstat_run),
    "openmetrics": (openmetrics_seeds, openmetrics_run),
    "dcgm_dmon": (dcgm_dmon_seeds, dcgm_dmon_run),
    "ncu": (ncu_seeds, ncu_run),
    "rocprof_csv": (rocprof_csv_seeds, rocprof_csv_run),
    "paths": (paths_seeds, paths_run),
    "options": (options_seeds, options_run),
    "api": (api_seeds, api_run),
}


def clean_errors(target: str) -> tuple[type, ...]:
    """The exception types that are ``target``'s documented refusals of bad input."""
    return _clean()[target]


__all__ = ["TARGETS", "clean_errors", "io"]
