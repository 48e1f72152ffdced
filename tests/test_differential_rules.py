"""One case per rule, each a line: a formula, raw registers of three samples (one chip, 1 ms apart) and
the value of each of the two windows worked out by hand. Every backend — the reference interpreter,
the generated ``evaluate``, ``Stream.push``, ``Stream.push_block`` and the generated SQL on DuckDB —
must give exactly that (None is null). The rules are those of ``metrics/windows.py`` (window values)
and ``metrics/interpreter.py`` (null propagation); in the manner of Linux perf's ``tests/expr.c``.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from perfonto.metrics import windows
from test_differential_backends import BACKENDS, PERIOD, Sig, _compile, run_backends

N = None
#: a.x / a.y over the two windows: 10 / 0 (null), then 10 / 5
ZERO_DIVISOR_FIRST = {"a.x": [0, 10, 20], "a.y": [0, 0, 5]}
B = (("i", 3),)
SIGS = [
    Sig("a.x", "counter", "event", (), 32),
    Sig("a.y", "counter", "event", (), 32),
    Sig("a.w", "counter", "event", (), 64, eff=32),
    Sig("a.u", "counter", "event", (), "unknown"),
    Sig("a.r", "counter", "event", (), 48, max_rate=1e4),
    Sig("a.amb", "counter", "event", (), 8, max_rate=1e6),
    Sig("a.s", "counter", "event", (), 32, sentinel=(4294967295,)),
    Sig("a.i", "counter", "event", (), 32, indicator="a.boot"),
    Sig("a.boot", "gauge", "event", (), across="max"),
    Sig("a.g", "gauge", "W", (), scale=0.001, sentinel=(65535,)),
    Sig("a.p", "packed", "1", (), 16, fields={"lo": (0, 3, 1.0), "hi": (4, 9, 0.5)}),
    Sig("a.c", "counter", "core_cycle", (), 32),
    Sig("b.v", "counter", "event", B, 32),
    Sig("b.h", "histogram", "event", B + (("bucket", 3),), 16, buckets=2),
    # issue 15.1: ranges that are not powers of two; 15.2: an uptime indicator;
    # 15.4: a unit field (RAPL-style, 2^-field J)
    Sig("a.e", "counter", "event", (), 32, modulus=1000),
    Sig("a.ej", "counter", "J", (), 32, scale=0.5, modulus=1000),
    Sig("a.em", "counter", "event", (), 32, modulus=100, max_rate=1e4),
    Sig("a.ema", "counter", "event", (), 32, modulus=100, max_rate=1e5),
    Sig("a.iu", "counter", "event", (), 32, indicator="a.up", uptime=True),
    Sig("a.up", "gauge", "s", (), across="max"),
    Sig("a.rapl", "packed", "1", (), 16, fields={"esu": (8, 12, 1.0)}),
    Sig("a.en", "counter", "J", (), 32, scale_field="a.rapl.esu"),
    Sig("a.enr", "counter", "J", (), 32, scale_field="a.rapl.esu", max_rate=1.0),
    # issue 15.3: 2 of 4 slots present
    Sig("m.q", "counter", "event", (("ch", 2),), 32, full=(("ch", 4),), slots=((1, 3),)),
]
ESU14, ESU16 = 14 << 8, 16 << 8
CLOCK_RATE = hasattr(windows, "max_rate")  # a cycle counter's clock is its max rate (rule 4)
H0 = [10] * 9

CASES = [
    # (what, unit, formula, {signal: raw per sample}, expected per window)
    ("32-bit wrap", "event", "a.x", {"a.x": [4294967000, 200, 300]}, [496, 100]),
    (
        "effective width: wraps at 32 bits inside 64",
        "event",
        "a.w",
        {"a.w": [2**40 + 4294967292, 2**40 + 3, 2**40 + 5]},
        [7, 2],
    ),
    ("an increase above half the range is a reset", "event", "a.x", {"a.x": [0, 2**31 + 1, 2**31 + 2]}, [N, 1]),
    ("half the range exactly is an increase", "event", "a.x", {"a.x": [0, 2**31, 2**31 + 1]}, [2**31, 1]),
    ("unknown width: any decrease is a reset", "event", "a.u", {"a.u": [10, 5, 7]}, [N, 2]),
    (
        "max rate: max_rate x interval / scale + 1 is the last valid increase",
        "event",
        "a.r",
        {"a.r": [0, 11, 23]},
        [11, N],
    ),
    ("max rate reaching the counter's range: ambiguous wrap", "event", "a.amb", {"a.amb": [0, 1, 2]}, [N, N]),
    ("sentinel at the start sample", "event", "a.s", {"a.s": [4294967295, 10, 20]}, [N, 10]),
    ("sentinel at the end sample", "event", "a.s", {"a.s": [10, 4294967295, 20]}, [N, N]),
    ("reset indicator changed", "event", "a.i", {"a.i": [100, 150, 158], "a.boot": [0, 1, 1]}, [N, 8]),
    ("gauge: mean of the endpoints x scale", "W", "a.g", {"a.g": [1000, 3000, 5000]}, [2.0, 4.0]),
    ("gauge sentinel", "W", "a.g", {"a.g": [65535, 1000, 3000]}, [N, 2.0]),
    ("packed fields: the end sample's bits x scale", "1", "a.p.lo + a.p.hi", {"a.p": [0, 0x35, 0x1F7]}, [6.5, 22.5]),
    ("a null register nulls both windows it touches", "event", "a.x", {"a.x": [0, N, 20]}, [N, N]),
    ("division by zero is null", "1", "a.x / a.y", ZERO_DIVISOR_FIRST, [N, 2.0]),
    # a literal zero divisor is refused at compile time (metrics.lint, div-zero); one that is zero at run time is null
    ("division by a value that is zero at run time is null", "1", "a.x / (a.x - a.x)", {"a.x": [0, 10, 20]}, [N, N]),
    ("min with a null operand is null", "1", "min(a.x / a.y, 5)", ZERO_DIVISOR_FIRST, [N, 2.0]),
    ("max with a null operand is null", "1", "max(a.x / a.y, 5)", ZERO_DIVISOR_FIRST, [N, 5.0]),
    ("clamp with a null operand is null", "1", "clamp(a.x / a.y, 0, 1)", ZERO_DIVISOR_FIRST, [N, 1.0]),
    ("a comparison with null is null, and so is if", "1", "1 if a.x / a.y > 1 else 2", ZERO_DIVISOR_FIRST, [N, 1]),
    (
        "and with a null operand is null even when the other is false",
        "1",
        "1 if (a.x / a.y > 1 and a.x < 0 [event]) else 2",
        ZERO_DIVISOR_FIRST,
        [N, 2],
    ),
    (
        "or with a null operand is null even when the other is true",
        "1",
        "1 if (a.x / a.y > 1 or a.x > 0 [event]) else 2",
        ZERO_DIVISOR_FIRST,
        [N, 1],
    ),
    ("not of null is null", "1", "1 if not (a.x / a.y > 1) else 2", ZERO_DIVISOR_FIRST, [N, 2]),
    ("the branch not taken may be null", "1", "(a.x / a.y) if a.y > 0 [event] else 7", ZERO_DIVISOR_FIRST, [7, 2.0]),
    (
        "overflow: inf - inf inside a formula is null, and so is a comparison of it",
        "1",
        "1 if a.x * 1e300 * 1e300 - a.x * 1e300 * 1e300 > 1 [event] else 2",
        {"a.x": [0, 0, 10]},
        [2, N],
    ),
    ("a metric's own inf is null", "event", "a.x * 1e300 * 1e300", {"a.x": [0, 0, 10]}, [0, N]),
    (
        "min over instances with one null instance is null",
        "event",
        "min(b.v)",
        {"b.v": [[0, 0, 0], [5, 2**31 + 1, 3], [6, 2**31 + 2, 4]]},
        [N, 1],
    ),
    (
        "avg over instances is the sum over the count",
        "event",
        "avg(b.v)",
        {"b.v": [[0, 0, 0], [3, 6, 9], [4, 8, 12]]},
        [6, 2],
    ),
    ("per-instance metric", "event", "b.v * 2", {"b.v": [[0, 0, 0], [3, 6, 9], [4, 8, 12]]}, [[6, 12, 18], [2, 4, 6]]),
    (
        "a decrease in one histogram bucket nulls every bucket of that instance",
        "event",
        "b.h",
        {"b.h": [H0, [12, 9, 15, 11, 11, 11, 10, 10, 10], [13, 10, 16, 12, 12, 12, 11, 11, 11]]},
        [[[N, N, N], [1, 1, 1], [0, 0, 0]], [[1, 1, 1]] * 3],
    ),
    ("declared range: the increase modulo 1000", "event", "a.e", {"a.e": [990, 5, 20]}, [15, 15]),
    ("declared range: a raw value at the range is null, both windows", "event", "a.e", {"a.e": [10, 1000, 20]}, [N, N]),
    ("declared range: above M // 2 = 500 is a reset", "event", "a.e", {"a.e": [0, 501, 502]}, [N, 1]),
    ("declared range: M // 2 exactly is an increase", "event", "a.e", {"a.e": [0, 500, 999]}, [500, 499]),
    (
        "declared range in the unit: 500 J at 0.5 J per count is 1000 counts",
        "J",
        "a.ej",
        {"a.ej": [999, 1, 3]},
        [1.0, 1.0],
    ),
    (
        "declared range with max rate: limit 1e4/s x 1 ms + 1 = 11 counts",
        "event",
        "a.em",
        {"a.em": [95, 3, 20]},
        [8, N],
    ),
    (
        "declared range reached by max_rate x interval + 1 = 101 >= 100: ambiguous",
        "event",
        "a.ema",
        {"a.ema": [0, 1, 2]},
        [N, N],
    ),
    (
        "uptime indicator: its increase is not a reset, its decrease is",
        "event",
        "a.iu",
        {"a.iu": [0, 10, 15], "a.up": [100, 101, 50]},
        [10, N],
    ),
    ("unit field: 2^-14 J per count", "J", "a.en", {"a.en": [0, 16384, 49152], "a.rapl": [ESU14] * 3}, [1.0, 2.0]),
    (
        "unit field: 2^-16 J per count, field bits above others",
        "J",
        "a.en",
        {"a.en": [0, 65536, 65537], "a.rapl": [ESU16 | 3] * 3},
        [1.0, 2**-16],
    ),
    (
        "unit field changes within the window: null",
        "J",
        "a.en",
        {"a.en": [0, 16384, 20000], "a.rapl": [ESU14, ESU14, ESU16]},
        [1.0, N],
    ),
    (
        "unit register null: both windows it touches are null",
        "J",
        "a.en",
        {"a.en": [0, 16384, 32768], "a.rapl": [ESU14, N, ESU14]},
        [N, N],
    ),
    (
        "unit field and max rate: 1 J/s x 1 ms / 2^-14 J + 1 = 17.384 counts",
        "J",
        "a.enr",
        {"a.enr": [0, 17, 35], "a.rapl": [ESU14] * 3},
        [17 / 16384, N],
    ),
    (
        "slots: a rollup runs over the present slots only",
        "event",
        "sum(m.q)",
        {"m.q": [[0, 0], [2, 5], [4, 9]]},
        [7, 6],
    ),
    ("spec constants and the interval: per chip", "1", "(spec.k0 * interval) / (2.5 [B])", {}, [0.001, 0.001]),
    (
        "a division inside a denominator (each null-safe denominator its own variable)",
        "B/s",
        "spec.k0 / (spec.k1 / spec.k0) / spec.k0",
        {},
        [0.625, 0.625],
    ),
]
if CLOCK_RATE:
    CASES.append(
        (
            "a cycle counter's clock is its max rate",
            "core_cycle",
            "a.c",
            {"a.c": [0, 1_000_000, 3_000_000]},
            [1_000_000, N],
        )
    )


def _table(samples: dict) -> pa.Table:
    cols = {"chip": pa.array([0, 0, 0], pa.int32()), "timestamp_ns": pa.array([0, PERIOD, 2 * PERIOD], pa.int64())}
    for s in SIGS:
        n = int(np.prod([k for _, k in s.axes])) if s.axes else 1
        vals = samples.get(s.name, [[0] * n if s.axes else 0] * 3)
        flat = pa.array([v for row in vals for v in (row if s.axes else [row])], pa.uint64())
        cols[s.name] = pa.FixedSizeListArray.from_arrays(flat, n) if s.axes else flat
    return pa.table(cols).replace_schema_metadata({b"perfonto": json.dumps({"sample_period_ns": PERIOD}).encode()})


@pytest.mark.parametrize("what,unit,formula,samples,expected", CASES, ids=[c[0] for c in CASES])
def test_rule(what, unit, formula, samples, expected):
    gen, graph = _compile(SIGS, f'metric t [{unit}] = {formula}\n  "case"\n')
    (res,) = run_backends(gen, graph, [_table(samples)], [1])
    want = np.array(expected, dtype=float)
    want = want.reshape((2, 1) + want.shape[1:])
    for backend in ("reference",) + BACKENDS:
        got = np.asarray(res[backend]["t"], dtype=float)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0, equal_nan=True, err_msg=f"{backend}: {what}")


def test_server_level_scales_per_chip_constants():
    gen, graph = _compile(SIGS, 'metric t [B/s] = spec.k0 + a.x * 0 [B/event] / interval\n  "case"\n')
    table = _table({})
    two = pa.concat_tables([table, table.set_column(0, "chip", pa.array([1, 1, 1], pa.int32()))])
    (res,) = run_backends(gen, graph, [two], [1])
    srv, ref, got = res["server"]
    assert srv.chips == 2.0
    np.testing.assert_allclose(ref["t"], [[5.0]])
    np.testing.assert_allclose(got["t"], [[5.0]])
