"""The engine's pieces and kernel outputs reuse their memory once nothing refers to it (a fresh buffer
costs the OS's zeroing of every page at its first write: ~9 % of a 2M-row analyze's CPU time), and never
while something does: a piece or result a caller still holds keeps its values whatever is read or
evaluated after it. The pass also leaves the garbage collector as it found it (``gc.freeze`` during it)."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from fleet_data import PERIOD_NS, dirty_fleet
from perfonto.capture import pieces
from perfonto.capture.dump_scan import plan_dump
from perfonto.codegen.python_evaluator import generate, load


def _flat_pieces(plan, sohu):
    columns = [(n, sohu.signals[n].instances) for n in plan.columns]
    return pieces.iter_chunks(plan, None, 16, columns=columns, readers=1)


def test_a_held_piece_is_never_written_over_and_a_released_one_is_reused(tmp_path, sohu):
    plan = plan_dump(dirty_fleet(tmp_path, sohu, hosts=3), sohu, sample_period_ns=PERIOD_NS)
    held = [(ch.flat.X, ch.flat.X.copy()) for ch in _flat_pieces(plan, sohu) if ch.flat is not None]
    assert len(held) > 2 * pieces.SPARE_MATRICES  # more pieces than a host keeps matrices
    assert all(np.array_equal(x, copy) for x, copy in held)  # each still as it was read
    assert len({id(x) for x, _ in held}) == len(held)  # all held at once: none could be reused
    copies = [copy for _, copy in held]
    del held[:]  # no matrix of the first pass is held any more
    seen: dict[int, list] = {}  # host → weak references to the matrices its pieces came in
    pieces_of, reused, n = {}, {}, 0
    for k, ch in enumerate(_flat_pieces(plan, sohu)):  # the same pieces, each dropped before the next
        if ch.flat is None:
            continue
        assert np.array_equal(ch.flat.X, copies[n]), k  # a reused matrix holds this piece's registers
        X = ch.flat.X if ch.flat.X.base is None else ch.flat.X.base
        refs = seen.setdefault(ch.group, [])
        # the same object as an earlier piece's (alive, so not a new array at a recycled address)
        reused[ch.group] = reused.get(ch.group, 0) + any(r() is X for r in refs)
        pieces_of[ch.group] = pieces_of.get(ch.group, 0) + 1
        refs.append(weakref.ref(X))
        n += 1
        del ch, X
    assert n > 2 * pieces.SPARE_MATRICES
    for g, count in pieces_of.items():  # each host's reader makes at most its pool's matrices (+ a last copy)
        assert reused[g] >= count - pieces.SPARE_MATRICES - 1 > 0, (g, reused[g], count)


@pytest.mark.slow  # compiles a kernel (numba)
def test_kernel_outputs_a_caller_holds_keep_their_values(monkeypatch):
    """Results of push_flat on fresh streams (as the engine calls it, piece by piece): the ones still held
    are unchanged after later calls; released ones lend their buffers to the next calls."""
    from test_differential_backends import Sig
    from test_kernel_differential import _compile

    sigs = [Sig("a.x", "counter", "event", (("i", 3),), 32), Sig("a.y", "counter", "event", (), 32)]
    src = 'metric p [event] = a.x\n  "p"\nmetric q [1] = sum(a.x) / a.y\n  "q"\n'
    _, graph = _compile(sigs, src)
    monkeypatch.delenv("PERFONTO_NO_JIT", raising=False)  # the compiled kernel: its outputs are the ones reused
    mod = load(generate(graph))
    assert mod._jit() is not None
    rng = np.random.default_rng(3)
    S, C = 300, 4
    T = np.arange(S * C, dtype=np.int64).reshape(S, C) // C * 1_000_000

    def piece():
        inc = rng.integers(0, 5, size=(4, S, C)).astype(np.uint64)
        return np.cumsum(inc, axis=1).reshape(4, S * C)

    held = []
    for _ in range(6):
        out = mod.Stream(jit=True).push_flat(T, piece())
        held.append((out, {k: (v.copy(), b.copy()) for k, (v, b) in out.items()}))
    for out, copy in held:
        for k, (v, b) in out.items():
            np.testing.assert_array_equal(v, copy[k][0])
            np.testing.assert_array_equal(b, copy[k][1])
    del held, out
    for _ in range(6):
        out = mod.Stream(jit=True).push_flat(T, piece())
        # the evaluator's own spare buffers (made for the calls above), lent again now that they are released
        assert any(out["q"][0].base is pair[0] for pair in mod._SPARE_OUT)
        del out


def test_the_pass_leaves_the_collector_as_it_found_it(tmp_path, sohu, capsys):
    from perfonto.cli import main

    src = dirty_fleet(tmp_path, sohu, hosts=1)
    assert gc.get_freeze_count() == 0
    assert main(["analyze", str(src), "--out", str(tmp_path / "o")]) == 0
    assert gc.get_freeze_count() == 0
    mine = [object()]
    gc.freeze()  # a caller's own frozen objects (e.g. before forking workers) stay frozen
    try:
        frozen = gc.get_freeze_count()
        assert main(["analyze", str(src), "--out", str(tmp_path / "o2")]) == 0
        assert gc.get_freeze_count() > frozen // 2  # not unfrozen (a frozen object may still be freed)
    finally:
        gc.unfreeze()
    capsys.readouterr()
    del mine
