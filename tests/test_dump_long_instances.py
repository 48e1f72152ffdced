"""A long-layout dump must give every declared instance of a signal somewhere: an instance that no
row of the whole dump gives is a refusal naming the signal, the instances given and the declared
count (a dump of another generation, or a SKU whose ``slots`` are not declared) — not a register
read as null everywhere ("10 missing sample"). An instance missing at some timestamps only stays a
null register there (a missing sample)."""

from __future__ import annotations

import numpy as np
import pytest

from perfonto.capture.dump import DumpError
from perfonto.capture.dump_scan import plan_dump
from perfonto.capture.pieces import iter_chunks
from perfonto.metrics.windows import MISSING, prepare, read_counters
from perfonto.ontology import load_generation

from helpers import MEM8_YAML

MS = 1_000_000


@pytest.fixture(scope="module")
def caelius():
    gen, _ = load_generation("caelius")
    assert gen.signals["hbm.read_bytes"].instances == 8
    return gen


def _long_csv(path, instances, samples=12, skip=()):
    """hbm.read_bytes of chip 0 at 0, 1, 2 … ms, value 100·s + i; rows (sample, instance) in ``skip`` left out."""
    lines = ["chip,timestamp_ns,signal,instance,value"]
    for s in range(samples):
        lines.append(f"0,{s * MS},seq.elapsed_cycles,,{s * 1000}")
        lines += [f"0,{s * MS},hbm.read_bytes,{i},{100 * s + i}" for i in instances if (s, i) not in skip]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_an_instance_no_row_gives_is_refused(tmp_path, caelius):
    p = _long_csv(tmp_path / "six.csv", range(6))
    for read in (
        lambda: read_counters(p, caelius, sample_period_ns=MS),
        lambda: plan_dump(p, caelius, sample_period_ns=MS),
    ):
        with pytest.raises(DumpError) as exc:
            read()
        msg = str(exc.value)
        assert msg.startswith(f"{p}: signal `hbm.read_bytes`: the rows give instances 0 … 5 only"), msg
        assert "`caelius` declares 8 instances (0 … 7); instances 6, 7 appear in no row" in msg
        assert "--generation" in msg and "`slots:` on block `hbm`" in msg


def test_an_instance_missing_at_one_timestamp_is_a_missing_sample(tmp_path, caelius):
    p = _long_csv(tmp_path / "gap.csv", range(8), skip={(4, 7)})
    dump = read_counters(p, caelius, sample_period_ns=MS)
    miss = dump.missing["hbm.read_bytes"]
    assert miss.shape == (12, 1, 8) and np.argwhere(miss).tolist() == [[4, 0, 7]]
    assert dump.raw["hbm.read_bytes"][5, 0].tolist() == [500, 501, 502, 503, 504, 505, 506, 507]
    w = prepare(dump, caelius)
    reason = w.null["hbm.read_bytes"][:, 0, 7]
    assert np.flatnonzero(reason == MISSING).tolist() == [3, 4]  # the two windows that touch sample 4
    assert caelius.signals["hbm.read_bytes"].scale == 64  # the register counts 64-byte bursts
    assert w.values["hbm.read_bytes"][2, 0].tolist() == [6400.0] * 8
    # the embedded engine reads the same
    plan = plan_dump(p, caelius, sample_period_ns=MS)
    (chunk,) = list(iter_chunks(plan, ["hbm.read_bytes"]))
    assert np.argwhere(chunk.dump.missing["hbm.read_bytes"]).tolist() == [[4, 0, 7]]


SKU = {
    "base.yaml": MEM8_YAML,
    "sku.yaml": "generation: sku\ndescription: 4 of 8 channels\nextends: base\nblocks:\n  mem:\n    slots: {channel: "
    "[0, 2, 4, 6]}\n",
}


def test_a_present_slot_no_row_gives_is_refused(tmp_path):
    for name, text in SKU.items():
        (tmp_path / name).write_text(text)
    gen, diags = load_generation(tmp_path / "sku.yaml")
    assert gen is not None, [d.render() for d in diags]
    p = tmp_path / "d.csv"
    p.write_text(
        "chip,timestamp_ns,signal,instance,value\n"
        + "".join(f"0,{s * MS},mem.read_bytes,{i},{s}\n" for s in range(3) for i in (0, 2, 4))
    )
    with pytest.raises(
        DumpError,
        match=r"gives? instances 0, 2, 4 only, but generation `sku` declares 4 present slots "
        r"\(0, 2, 4, 6\) of 8; instance 6 appears in no row",
    ):
        read_counters(p, gen, sample_period_ns=MS)
