"""Issue 15, points 1–4: counter semantics the field needs, from the YAML a catalog author writes to
the window values — declared wrap ranges, reset-indicator kinds, instance slots of a SKU, unit fields
(RAPL-style) — with numbers worked out by hand, the dump layouts a SKU's collector may write, and the
located diagnostics of bad declarations. The backends' agreement on these rules is in
``test_differential_rules`` (one line per rule) and ``test_differential`` (random catalogs)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from perfonto.metrics.windows import OUT_OF_RANGE, RESET, UNIT_CHANGED, VALID, prepare, read_counters
from perfonto.capture.dump import DumpError
from perfonto.ontology import load_generation
from test_differential_backends import BACKENDS, PERIOD, _compile, run_backends
from test_differential_rules import SIGS
from helpers import MEM8_YAML, one_block_yaml

BASE = (
    MEM8_YAML
    + """\
  power:
    description: energy
    clock: core
    signals:
      energy_uj: {kind: counter, unit: J, scale: 1.0e-6, width: 64, wrap_range: 262143.328850 J,
                  description: "powercap energy_uj: wraps at max_energy_range_uj"}
      boots: {kind: gauge, unit: event, description: boot count}
      uptime: {kind: gauge, unit: s, description: seconds since boot}
      by_boot: {kind: counter, unit: event, width: 32, reset_indicator: power.boots, description: reset on boot}
      by_uptime: {kind: counter, unit: event, width: 32, reset_indicator: power.uptime, reset_indicator_kind: uptime,
                  description: reset when uptime goes down}
      rapl_unit: {kind: packed, width: 32, description: MSR_RAPL_POWER_UNIT,
                  fields: {energy: {bits: [8, 12], description: energy status units (2^-ESU J)}}}
      pkg_energy: {kind: counter, unit: J, width: 32, scale_field: {field: power.rapl_unit.energy, base: 0.5},
                   description: MSR_PKG_ENERGY_STATUS}
"""
)
SKU = """\
generation: sku
description: the base with 4 of its 8 channels populated
extends: base
blocks:
  mem:
    slots: {channel: [0, 2, 4, 6]}
"""


@pytest.fixture(scope="module")
def gens(tmp_path_factory):
    d = tmp_path_factory.mktemp("gens")
    (d / "base.yaml").write_text(BASE)
    (d / "sku.yaml").write_text(SKU)
    out = {}
    for name in ("base", "sku"):
        g, diags = load_generation(d / f"{name}.yaml")
        assert g is not None, [x.render() for x in diags]
        out[name] = g
    return out


def _keys(n: int) -> dict:
    return {"chip": pa.array([0] * n, pa.int32()), "timestamp_ns": pa.array([i * PERIOD for i in range(n)], pa.int64())}


META = {b"perfonto": json.dumps({"sample_period_ns": PERIOD}).encode()}
# 3 samples of 8 slots; the slots that are not populated (odd) read garbage (0xFFFFFFFF, 7, ...)
EIGHT = [
    [0, 2**32 - 1, 100, 7, 1000, 2**32 - 1, 10, 3],
    [40, 5, 160, 9, 1500, 1, 10, 3],
    [50, 9, 260, 1, 1600, 4, 90, 3],
]
PRESENT = [[row[i] for i in (0, 2, 4, 6)] for row in EIGHT]


def test_sku_slots_resolve_to_the_present_instances(gens):
    sig = gens["sku"].signals["mem.read_bytes"]
    assert sig.axes == (("channel", 4),) and sig.slots == (0, 2, 4, 6) and sig.full_instances == 8
    assert gens["base"].signals["mem.read_bytes"].slots is None


def _layouts():
    """The same capture in every layout a SKU's collector may write."""
    flat = pa.array([v for row in EIGHT for v in row], pa.uint64())
    four = pa.array([v for row in PRESENT for v in row], pa.uint64())
    out = {
        "list of all 8 slots": pa.table({**_keys(3), "mem.read_bytes": pa.FixedSizeListArray.from_arrays(flat, 8)}),
        "list of the 4 present slots": pa.table(
            {**_keys(3), "mem.read_bytes": pa.FixedSizeListArray.from_arrays(four, 4)}
        ),
        "variable list of all 8": pa.table({**_keys(3), "mem.read_bytes": pa.array(EIGHT, pa.list_(pa.uint64()))}),
        "flat name[i], all 8": pa.table(
            {**_keys(3), **{f"mem.read_bytes[{i}]": pa.array([r[i] for r in EIGHT], pa.uint64()) for i in range(8)}}
        ),
        "flat name[i], present slots": pa.table(
            {**_keys(3), **{f"mem.read_bytes[{i}]": pa.array([r[i] for r in EIGHT], pa.uint64()) for i in (0, 2, 4, 6)}}
        ),
    }
    for label, slots in (("long, all 8", range(8)), ("long, present slots", (0, 2, 4, 6))):
        rows = [(s, i, EIGHT[s][i]) for s in range(3) for i in slots]
        out[label] = pa.table(
            {
                "chip": pa.array([0] * len(rows), pa.int32()),
                "timestamp_ns": pa.array([s * PERIOD for s, _, _ in rows], pa.int64()),
                "signal": pa.array(["mem.read_bytes"] * len(rows)),
                "instance": pa.array([i for _, i, _ in rows], pa.int64()),
                "value": pa.array([v for _, _, v in rows], pa.uint64()),
            }
        )
    return {k: v.replace_schema_metadata(META) for k, v in out.items()}


@pytest.mark.parametrize("layout", list(_layouts()))
def test_sku_dump_is_read_in_every_layout(gens, layout):
    gen = gens["sku"]
    dump = read_counters(_layouts()[layout], gen)
    assert dump.raw["mem.read_bytes"].shape == (3, 1, 4)
    np.testing.assert_array_equal(dump.raw["mem.read_bytes"][:, 0], np.array(PRESENT, np.uint64))
    w = prepare(dump, gen)
    # hand-worked: slot deltas (40, 60, 500, 0) then (10, 100, 100, 80); the absent slots' garbage is not read
    np.testing.assert_array_equal(w.values["mem.read_bytes"][:, 0], [[40, 60, 500, 0], [10, 100, 100, 80]])


def test_sku_rollup_runs_over_present_slots(gens):
    gen = gens["sku"]
    graph = _compile_yaml(
        gen,
        'metric mem.total [B] = sum(mem.read_bytes)\n  "all channels"\nmetric mem.busiest [B] = '
        'max(mem.read_bytes)\n  "one channel"\n',
    )
    from perfonto.metrics.interpreter import evaluate

    w = prepare(read_counters(_layouts()["list of all 8 slots"], gen), gen)
    res = evaluate(graph, w)
    np.testing.assert_array_equal(res["mem.total"][:, 0], [600, 290])  # 40+60+500+0, 10+100+100+80
    np.testing.assert_array_equal(res["mem.busiest"][:, 0], [500, 100])


def test_base_generation_still_refuses_a_narrower_dump(gens):
    t = _layouts()["list of the 4 present slots"]
    with pytest.raises(DumpError, match="4 instances, the generation declares 8"):
        read_counters(t, gens["base"])


def test_sku_refuses_another_slot_count(gens):
    six = pa.array([v for row in EIGHT for v in row[:6]], pa.uint64())
    t = pa.table({**_keys(3), "mem.read_bytes": pa.FixedSizeListArray.from_arrays(six, 6)}).replace_schema_metadata(
        META
    )
    with pytest.raises(DumpError, match="declares 4 present of 8 slots"):
        read_counters(t, gens["sku"])
    cols = {f"mem.read_bytes[{i}]": pa.array([0, 1, 2], pa.uint64()) for i in (0, 1, 2, 3)}
    with pytest.raises(DumpError, match="present slots only"):
        read_counters(pa.table({**_keys(3), **cols}).replace_schema_metadata(META), gens["sku"])


def test_sql_reads_a_list_of_every_slot():
    """The SQL target indexes the present slots of a full-width list, and the present-only list as is."""
    gen, graph = _compile(SIGS, 'metric t [event] = sum(m.q)\n  "case"\n')
    full = [[0, 0, 7, 0], [9, 2, 9, 5], [9, 4, 9, 9]]  # slots 1 and 3 present: deltas (2, 5), (2, 4)
    cols = _keys(3)
    for s in SIGS:
        n = int(np.prod([k for _, k in s.axes])) if s.axes else 1
        if s.name == "m.q":
            cols[s.name] = pa.FixedSizeListArray.from_arrays(pa.array([v for r in full for v in r], pa.uint64()), 4)
        else:
            cols[s.name] = (
                pa.FixedSizeListArray.from_arrays(pa.array([0] * 3 * n, pa.uint64()), n)
                if s.axes
                else pa.array([0] * 3, pa.uint64())
            )
    (res,) = run_backends(gen, graph, [pa.table(cols).replace_schema_metadata(META)], [1])
    for b in ("reference",) + BACKENDS:
        np.testing.assert_array_equal(np.asarray(res[b]["t"], float)[:, 0], [7, 6], err_msg=b)


def _compile_yaml(gen, src):
    from helpers import compile_src

    g = compile_src(gen, src)
    assert not g.errors, [d.render() for d in g.errors]
    return g


def _power(gen, rows):
    cols = _keys(len(rows))
    for name in (
        "power.energy_uj",
        "power.boots",
        "power.uptime",
        "power.by_boot",
        "power.by_uptime",
        "power.rapl_unit",
        "power.pkg_energy",
    ):
        cols[name] = pa.array([r.get(name, 0) for r in rows], pa.uint64())
    return prepare(read_counters(pa.table(cols).replace_schema_metadata(META), gen), gen)


def test_powercap_energy_wraps_at_max_energy_range(gens):
    """max_energy_range_uj = 262143328850: 262143328000 µJ → 1150 µJ is 850 + 1150 = 2000 µJ (2 W over 1 ms)."""
    gen = gens["base"]
    assert gen.signals["power.energy_uj"].modulus == 262_143_328_850
    w = _power(
        gen,
        [
            {"power.energy_uj": 262_143_328_000},
            {"power.energy_uj": 1150},
            {"power.energy_uj": 262_143_328_850},
            {"power.energy_uj": 4150},
        ],
    )
    v, r = w.values["power.energy_uj"][:, 0], w.null["power.energy_uj"][:, 0]
    assert v[0] == pytest.approx(0.002, rel=1e-12) and r[0] == VALID
    # a raw value at the range cannot be read from the register: both windows touching it are null, with their reason
    assert np.isnan(v[1:]).all() and list(r[1:]) == [OUT_OF_RANGE, OUT_OF_RANGE]


def test_uptime_indicator_resets_only_on_a_decrease(gens):
    gen = gens["base"]
    rows = [
        {"power.boots": 3, "power.uptime": 100, "power.by_boot": 0, "power.by_uptime": 0},
        {
            "power.boots": 3,
            "power.uptime": 101,
            "power.by_boot": 10,
            "power.by_uptime": 10,
        },  # uptime grows: not a reset
        {"power.boots": 4, "power.uptime": 2, "power.by_boot": 4, "power.by_uptime": 4},  # reboot: both are resets
        {"power.boots": 4, "power.uptime": 3, "power.by_boot": 9, "power.by_uptime": 9},
    ]
    w = _power(gen, rows)
    np.testing.assert_array_equal(w.values["power.by_uptime"][:, 0], [10, np.nan, 5])
    assert list(w.null["power.by_uptime"][:, 0]) == [VALID, RESET, VALID]
    # a boot counter at 3, 3, 4, 4: the same windows
    np.testing.assert_array_equal(w.values["power.by_boot"][:, 0], [10, np.nan, 5])


def test_rapl_energy_unit_decoded_per_sample(gens):
    """ESU 14 (0x0E00 in bits 8..12): 2^-14 J per count; 49152 − 16384 = 32768 counts = 2 J;
    then ESU 16: unit changed."""
    gen = gens["base"]
    rows = [
        {"power.rapl_unit": 0x0E03, "power.pkg_energy": 0},
        {"power.rapl_unit": 0x0E03, "power.pkg_energy": 16384},
        {"power.rapl_unit": 0x0E03, "power.pkg_energy": 49152},
        {"power.rapl_unit": 0x1003, "power.pkg_energy": 50000},
    ]
    w = _power(gen, rows)
    np.testing.assert_array_equal(w.values["power.pkg_energy"][:, 0], [1.0, 2.0, np.nan])
    assert list(w.null["power.pkg_energy"][:, 0]) == [VALID, VALID, UNIT_CHANGED]


def test_counter_without_its_unit_register_is_left_out(gens):
    cols = {**_keys(2), "power.pkg_energy": pa.array([0, 5], pa.uint64())}
    dump = read_counters(pa.table(cols).replace_schema_metadata(META), gens["base"])
    assert "power.pkg_energy" in dump.absent and any("power.rapl_unit.energy" in n for n in dump.notes)


@pytest.mark.parametrize(
    "text,scale,modulus",
    [
        ("4611686018427400249 B", "1", 2**62 + 12345),  # past 2^53: a float would give ...400192
        ("18446744073709551557 B", "1", 2**64 - 59),
        ("4722366482869657854.976 kB", "1024", 2**62 + 12345),  # in kB, over a scale: exact all the way
    ],
)
def test_wrap_range_is_exact_past_a_doubles_precision(tmp_path, text, scale, modulus):
    """A wrap range is a whole number of raw counts and is read exactly, not through a float."""
    p = tmp_path / "g.yaml"
    p.write_text(
        one_block_yaml(
            "big",
            f"      x: {{kind: counter, unit: B, scale: {scale}, width: 64, wrap_range: {text}, description: x}}\n",
            block="c",
        )
    )
    gen, diags = load_generation(p)
    assert gen is not None, [d.render() for d in diags]
    assert gen.signals["c.x"].modulus == modulus


BAD = [
    ("wrap_range: 1 event", "counter", "wrap-range", "at least 2 raw counts"),
    ("wrap_range: 0.5 event", "counter", "wrap-range", "not a whole number"),
    ("wrap_range: 5000000000 event", "counter", "wrap-range", "more than a 32-bit register"),
    ("wrap_range: 10 B", "counter", "wrap-range", "not a quantity in event"),
    ("wrap_range: 100 event, effective_width: 16", "counter", "wrap-range", "both say where"),
    ("scale_field: {field: c.unit.nope}", "counter", "scale-field", "not a field of a packed register"),
    ("scale_field: {field: c.x}", "counter", "scale-field", "not a field of a packed register"),
    ("scale_field: {field: c.unit.esu, base: 1}", "counter", "scale-field", "base 1"),
    ("reset_indicator_kind: uptime", "counter", "reset-indicator", "without a `reset_indicator`"),
]


@pytest.mark.parametrize("extra,kind,code,text", BAD, ids=[b[0] for b in BAD])
def test_bad_declarations_are_located_diagnostics(tmp_path, extra, kind, code, text):
    y = one_block_yaml(
        "bad",
        f"""\
      x: {{kind: {kind}, unit: event, width: 32, description: x, {extra}}}
      unit: {{kind: packed, width: 16, description: unit register,
              fields: {{esu: {{bits: [8, 12], description: esu}}}}}}
""",
        block="c",
    )
    p = tmp_path / "bad.yaml"
    p.write_text(y)
    g, diags = load_generation(p)
    assert g is None
    hits = [d for d in diags if d.code == code]
    assert hits and text in hits[0].message, [d.render() for d in diags]
    d = hits[0]
    assert d.span.file.endswith("bad.yaml") and d.span.line == 10 and d.span.col > 1 and d.hint
    assert "bad.yaml:10:" in d.render()


@pytest.mark.parametrize(
    "slots,text",
    [
        ("{channel: [0, 8]}", "slot 8 is outside axis `channel` (0 … 7)"),
        ("{chanel: [0]}", "not an instance axis"),
        ("{channel: []}", "empty slot list"),
        ("{channel: [1, 1]}", "listed twice"),
    ],
)
def test_bad_slots_are_located_diagnostics(tmp_path, slots, text):
    (tmp_path / "base.yaml").write_text(BASE)
    (tmp_path / "sku.yaml").write_text(SKU.replace("{channel: [0, 2, 4, 6]}", slots))
    g, diags = load_generation(tmp_path / "sku.yaml")
    assert g is None
    d = next(d for d in diags if d.code == "slots")
    assert text in d.message and d.span.file.endswith("sku.yaml") and d.span.line == 6 and d.hint
    if "chanel" in slots:
        assert "channel" in d.hint


def test_one_indicator_read_two_ways_is_an_error(tmp_path):
    y = BASE.replace("reset_indicator: power.boots,", "reset_indicator: power.uptime,")
    p = tmp_path / "b.yaml"
    p.write_text(y)
    g, diags = load_generation(p)
    assert g is None
    d = next(d for d in diags if d.code == "reset-indicator")
    assert "power.uptime" in d.message and d.hint
