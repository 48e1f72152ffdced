"""Emulator bindings as data (issue 13, point 4): what the emulator counts for each signal is the
ontology's ``emulator:`` binding, checked where it can be (shape in the ontology, names and units in
the emulator), inherited through ``extends``; a counter added in YAML alone appears in an emulated run."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pyarrow.parquet as pq
import pytest

from perfonto import emulator
from perfonto.analysis.evaluate import evaluate_dump, load_evaluator
from perfonto.cli import main
from perfonto.codegen.python_evaluator import generate
from perfonto.emulator.models import get_model
from perfonto.emulator.ops import build_ops
from perfonto.emulator.quantities import BindingError, check_bindings, of_kind, registry
from perfonto.emulator.timeline import CYCLE_QUANTITIES
from perfonto.metrics.catalog import load_catalog
from perfonto.ontology import load_generation, shipped_generations
from perfonto.ontology.loader import load_generation_files

from test_emulator import _batch, _cfg


def _hbm_signals(tmp_path, signals: str, name: str = "x", parent: str = "sohu"):
    """A generation extending ``parent`` whose ``hbm`` block declares ``signals`` (YAML lines, dedented):
    the first of them stands on line 7. Returns the file, the generation and the diagnostics."""
    path = tmp_path / f"{name}.yaml"
    head = f"generation: {name}\nextends: {parent}\ndescription: test\nblocks:\n  hbm:\n    signals:\n"
    path.write_text(head + textwrap.indent(textwrap.dedent(signals), " " * 6))
    return path, *load_generation(path)


@pytest.mark.parametrize("name", shipped_generations())
def test_shipped_generations_bind_every_signal_to_known_quantities(name):
    gen, diags = load_generation(name)
    assert gen is not None and not diags
    # the emulator models every shipped signal but the DMA transfer-size histogram
    assert [s for s, sig in gen.signals.items() if sig.emulator is None] == ["dma.transfer_sizes"]
    assert check_bindings(gen) == []


def test_registry_is_what_the_emulator_computes():
    """Every listed quantity is computed and every computed quantity is listed (one source of truth)."""
    sohu, _ = load_generation("sohu")
    cfg = _cfg(get_model("llama-3.1-8b"), emulator.hardware_from_generation(sohu), 1)
    t = build_ops(_batch(decode_tokens=4, decode_keys=400, head_tokens=4, batch=4), cfg)
    amounts = set(of_kind("amount"))
    assert amounts == set(CYCLE_QUANTITIES) | (set(t.q) - {"c2c_busy_slow"})
    assert set(of_kind("impulse")) == set(t.impulses)
    assert set(of_kind("level")) == set(t.gauges) | {"power", "temperature"}  # the last two: board telemetry
    assert all(q.meaning and q.unit for q in registry().values())


def test_unknown_quantity_is_located_with_a_did_you_mean(tmp_path, capsys):
    path, gen, diags = _hbm_signals(
        tmp_path,
        """\
              weight_bytes: {kind: counter, unit: B, width: 64, description: "Weight bytes.",
                             emulator: {linear: {hbm_weigths: 1}, split: jitter}}
              level: {kind: gauge, unit: B, description: "A level.", emulator: {gauge: hbm_read, split: even}}
        """,
    )
    assert gen is not None and not diags  # the ontology cannot know the emulator's names
    found = check_bindings(gen)
    assert [d.code for d in found] == ["unknown-quantity", "unknown-quantity"]
    first, second = found
    line = path.read_text().splitlines().index(next(x for x in path.read_text().splitlines() if "hbm_weigths" in x)) + 1
    assert (first.span.file, first.span.line) == (str(path), line)
    assert path.read_text().splitlines()[line - 1][first.span.col - 1 :].startswith("hbm_weigths")
    assert "did you mean `hbm_weights`" in first.hint and "hbm_weigths" in first.render()
    assert "is an emulator amount, not a level" in second.message and "`linear` binding" in second.hint
    with pytest.raises(BindingError) as exc:
        emulator.run(gen, duration_s=0.01, sample_period_s=0.005, out_dir=tmp_path / "run")
    assert f"{path}:{line}:" in str(exc.value)
    assert main(["emulator-quantities", "--generation", str(path)]) == 1
    capsys.readouterr()
    assert main(["check", "--catalog", str(tmp_path), "--generation", "x", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    errors = [d for d in doc["diagnostics"] if d["severity"] == "error"]
    assert [d["code"] for d in errors] == ["unknown-quantity", "unknown-quantity"] and errors[0]["line"] == line


def test_unit_that_does_not_convert_is_located(tmp_path):
    path, gen, _ = _hbm_signals(
        tmp_path,
        """\
              odd: {kind: counter, unit: FLOP, width: 64, description: "Wrong unit.",
                    emulator: {linear: {hbm_read: 1}, split: even}}
        """,
    )
    (d,) = check_bindings(gen)
    assert d.code == "unit-mismatch" and "FLOP" in d.message and "`hbm_read` is in B" in d.message


@pytest.mark.parametrize(
    "binding, message",
    [
        (
            "{linear: {hbm_read: 1}, gauge: batch}",
            "give exactly one of linear, impulse, gauge, event_rate, constant (got linear, gauge)",
        ),
        ("{gauge: batch, split: even}", "`gauge` is for a gauge, but the signal is a counter"),
        ("{linear: {hbm_read: 1}}", "block instances stack: 6 need a `split`"),
        ("{linear: {hbm_read: 1}, split: one}", "`split: one` is for blocks without instances"),
        ("{impulse: steps, split: each}", "`split` does not apply to `impulse`"),
        ("{event_rate: 1.0, split: even}", "`split: even` does not apply"),
        ("{constant: 4294967296}", "constant 4294967296 does not fit in the 32-bit register"),
        ("{linear: {hbm_read: 0}, split: even}", "coefficient of `hbm_read` must be a finite non-zero number"),
        ("{gauge: batch, leader_only: true}", "`gauge` is for a gauge"),
        ("{linaer: {hbm_read: 1}}", "unknown field `linaer`"),
    ],
)
def test_binding_shape_errors_are_located(tmp_path, binding, message):
    path, gen, diags = _hbm_signals(
        tmp_path,
        f"""\
              sig: {{kind: counter, unit: B, width: 32, description: "A counter.", emulator: {binding}}}
        """,
    )
    assert gen is None
    assert any(message in d.message for d in diags), [d.message for d in diags]
    d = next(d for d in diags if message in d.message)
    assert (
        d.span.file == str(path)
        and d.span.line == 7
        and d.span.col > path.read_text().splitlines()[6].index("emulator")
    )


def test_a_child_replaces_the_whole_binding_or_unbinds(tmp_path):
    _, gen, diags = _hbm_signals(
        tmp_path,
        """\
              read_bytes: {emulator: {constant: 0}}
              refresh_cycles: {emulator: null}
        """,
    )
    assert not diags
    assert gen.signals["hbm.read_bytes"].emulator.kind == "constant"  # not merged with the parent's `linear`
    assert gen.signals["hbm.refresh_cycles"].emulator is None
    assert gen.signals["hbm.write_bytes"].emulator.describe() == "linear: 1 × hbm_write (jitter)"  # inherited
    caelius, _ = load_generation("caelius")
    assert caelius.signals["c2c.replays"].emulator.kind == "events"  # the binding moves with a rename


def test_an_unbound_signal_is_absent_from_the_dump(tmp_path):
    _, gen, _ = _hbm_signals(
        tmp_path,
        """\
              refresh_cycles: {emulator: null}
              scrub_cycles: {kind: counter, unit: hbm_cycle, width: 32, description: "Not modelled by the emulator."}
        """,
    )
    r = emulator.run(
        gen, model="llama-3.1-8b", chips=1, duration_s=0.02, sample_period_s=0.005, out_dir=tmp_path / "run"
    )
    t = pq.read_table(r.counters_path)
    unbound = {"hbm.refresh_cycles", "hbm.scrub_cycles", "dma.transfer_sizes"}  # the last one unbound in sohu
    assert not unbound & set(t.column_names)
    assert t.column_names[2:] == [s for s in gen.signals if s not in unbound]
    meta = json.loads(t.schema.metadata[b"perfonto"])
    assert set(meta["unbound_signals"]) == unbound


def _caelius_plus(tmp_path):
    """A catalog folder extending caelius with one new counter, HBM weight bytes per stack, bound to an
    existing quantity (``hbm_weights``)."""
    folder = tmp_path / "catalog"
    folder.mkdir()
    (folder / "caelius_plus.yaml").write_text(
        textwrap.dedent("""\
        generation: caelius_plus
        extends: caelius
        description: Caelius with a counter of HBM weight bytes, per stack.
        blocks:
          hbm:
            signals:
              weight_read_bytes: {kind: counter, unit: B, width: 48, scale: 64,
                                  description: "Weight bytes read from the stack, in 64-byte bursts.",
                                  emulator: {linear: {hbm_weights: 1}, split: jitter}}
        """)
    )
    return folder


def test_a_counter_added_in_yaml_alone_appears_in_an_emulated_run(tmp_path):
    """Issue 13's acceptance: a catalog folder extending caelius with one new counter bound to an existing
    quantity, and a metric over it; its values equal the ground truth derived from the binding."""
    folder = _caelius_plus(tmp_path)
    (folder / "weights.metrics").write_text(
        textwrap.dedent("""\
        metric hbm.weight_gigabytes [GB] = sum(hbm.weight_read_bytes)
          "Weight bytes read from HBM, all stacks."
          groups memory
        metric hbm.weight_share [percent] = sum(hbm.weight_read_bytes) / (sum(hbm.read_bytes) + sum(hbm.write_bytes))
          "Share of HBM traffic that is weights."
          groups memory
        """)
    )
    gen, diags = load_generation_files(sorted(folder.glob("*.yaml")), "caelius_plus")
    assert gen is not None and not [d for d in diags if d.severity == "error"]
    r = emulator.run(gen, chips=8, duration_s=0.2, sample_period_s=0.01, warmup_steps=50, out_dir=tmp_path / "run")
    gt = r.ground_truth
    t = pq.read_table(r.counters_path)
    raw = t.column("hbm.weight_read_bytes").combine_chunks().flatten().to_numpy().reshape(-1, 8, 8).astype(np.int64)
    total = float((raw[-1] - raw[0]).sum()) * 64  # 48-bit register: no wrap in 0.2 s
    truth = gt["quantities"]["hbm_weights"]  # Σ over chips; 1 × the quantity, jitter keeps the sum
    assert truth > 1e9 and total == pytest.approx(truth, rel=1e-6, abs=64 * 64)
    per_chip = (raw[-1] - raw[0]).sum(axis=1) * 64.0
    assert per_chip == pytest.approx([c["quantities"]["hbm_weights"] for c in gt["per_chip"]], rel=1e-6)
    cat = load_catalog(folder, "caelius_plus")
    assert not cat.errors, [d.render() for d in cat.errors]
    (tmp_path / "ev.py").write_text(generate(cat.graph))
    ev = evaluate_dump(cat.graph, load_evaluator(tmp_path / "ev.py"), r.counters_path)
    assert float(ev.server["hbm.weight_gigabytes"]) == pytest.approx(truth / 1e9, rel=1e-6)
    hbm = gt["hbm_read_bytes"] + gt["hbm_write_bytes"]
    assert float(ev.server["hbm.weight_share"]) == pytest.approx(100 * truth / hbm, rel=1e-6)


def test_perfonto_run_catalog_reports_the_new_counter_and_its_metric(tmp_path, capsys):
    """The same acceptance through the command line: ``perfonto run --catalog DIR``."""
    folder = _caelius_plus(tmp_path)
    (folder / "weights.metrics").write_text(
        "metric hbm.weight_gigabytes [GB] = sum(hbm.weight_read_bytes)\n"
        '  "Weight bytes read from HBM."\n  groups memory\n'
    )
    out = tmp_path / "run"
    assert (
        main(
            [
                "run",
                "--catalog",
                str(folder),
                "--duration",
                "0.3s",
                "--sample-period",
                "10ms",
                "--out",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    gt = json.loads((out / "ground_truth.json").read_text())
    assert (
        doc["generation"] == "caelius_plus"
        and "hbm.weight_read_bytes" in pq.read_schema(out / "counters.parquet").names
    )
    assert doc["metrics"]["hbm.weight_gigabytes"]["value"] == pytest.approx(
        gt["quantities"]["hbm_weights"] / 1e9, rel=1e-6
    )
    assert doc["metrics"]["mfu"]["value"] is not None  # the shipped library comes with the extension
