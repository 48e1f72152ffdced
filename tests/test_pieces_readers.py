"""``capture.pieces.iter_chunks`` with several hosts read at once (issue 26: the fleet's reading overlaps
across hosts): the same pieces in the same order whatever the number of readers, an error raised at the
piece where it happened, and a caller that stops early leaves no reading thread behind."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from fleet_data import PERIOD_NS, dirty_fleet
from perfonto.capture import pieces
from perfonto.capture.dump_scan import plan_dump


def _pieces(plan, readers: int, columns=None):
    out = []
    for ch in pieces.iter_chunks(plan, None, 64, columns=columns, readers=readers):
        d = ch.dump
        out.append((ch.group, ch.host, ch.first, d.timestamps_ns.copy(), {n: v.copy() for n, v in d.raw.items()}))
    return out


def _same(a, b) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x[:3] != y[:3] or not np.array_equal(x[3], y[3]) or x[4].keys() != y[4].keys():
            return False
        if any(not np.array_equal(x[4][n], y[4][n]) for n in x[4]):
            return False
    return True


@pytest.mark.parametrize("flat", [False, True])
def test_pieces_are_the_same_with_several_readers(tmp_path, sohu, flat):
    src = dirty_fleet(tmp_path, sohu, hosts=5)
    plan = plan_dump(src, sohu, sample_period_ns=PERIOD_NS)
    columns = [(n, sohu.signals[n].instances) for n in plan.columns] if flat else None
    one = _pieces(plan, 1, columns)
    assert len({p[1] for p in one}) == 5 and len(one) > 5  # every host, several pieces each
    assert [p[0] for p in one] == sorted(p[0] for p in one)  # host by host
    for readers in (2, 3, 8):
        assert _same(_pieces(plan, readers, columns), one), readers


def _host(items, fail_at=None):
    def gen():
        for i, x in enumerate(items):
            if i == fail_at:
                raise ValueError(f"bad piece {x}")
            yield x

    return gen


def _reading_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("perfonto-read")]


def test_an_error_is_raised_at_its_piece_and_the_threads_stop():
    hosts = [_host(["a0", "a1"]), _host(["b0", "b1", "b2"], fail_at=2), _host(["c0"])]
    got = []
    with pytest.raises(ValueError, match="bad piece b2"):
        for x in pieces._prefetch(hosts, readers=2):
            got.append(x)
    assert got == ["a0", "a1", "b0", "b1"]  # every piece before the bad one, in order
    it = pieces._prefetch([_host(range(100)) for _ in range(4)], readers=3, depth=1)
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    it.close()  # the caller stops early
    assert not _reading_threads()
