"""The headline of a run: the one finding to read first, from the top-down tree and the multi-chip view.

Rule (``headline``):

1. Waiting for a slower peer first. When ``topdown.interconnect.peer_wait`` (the chips' cycles spent
   at collectives waiting for the last chip to arrive) is above its threshold, the headline is that
   wait and the chip waited on: the multi-chip analysis's straggler when there is one, else the chip
   that waits least while the others wait (from the per-chip values of the same metric). A group
   in lock step runs at its slowest chip's pace, so every other share describes a server slowed by
   it; counting the wait as "interconnect" would send the engineer to the links.
2. Otherwise the deepest node of the top-down drill-down (the largest node above its threshold at
   each level, Yasin's top-down method), e.g. ``topdown.interconnect.link_transfer``.
3. Otherwise the level-1 bottleneck.
"""

from __future__ import annotations

import numpy as np

from .bottleneck import crossed_where
from .evaluate import chip_names

PEER_WAIT = "topdown.interconnect.peer_wait"


def _value(x) -> float:
    return float(x) if np.ndim(x) == 0 and np.isfinite(float(x)) else float("nan")


def waited_on(graph, ev, multichip: dict | None) -> int | None:
    """The chip the others wait for: the multi-chip straggler, else the chip whose per-chip peer-wait
    share is lowest while the median chip waits at least twice as long (None when unclear)."""
    i = _waited_on_column(graph, ev, multichip)
    if i is None:
        st = ((multichip or {}).get("collective") or {}).get("straggler") or (multichip or {}).get("straggler")
        return int(st["chip"]) if st else None
    return int(ev.chips[i])


def _waited_on_column(graph, ev, multichip: dict | None) -> int | None:
    """``waited_on``'s chip as a column of ``ev`` (which names its host too), None when unclear or when
    the straggler is not one of ``ev``'s chips."""
    coll = (multichip or {}).get("collective") or {}
    st = coll.get("straggler") or (multichip or {}).get("straggler")
    if st:
        cols = [k for k, c in enumerate(ev.chips) if int(c) == int(st["chip"])]
        return cols[0] if len(cols) == 1 else None
    return _waited_on_per_group(graph, ev, np.arange(len(ev.chips)))


def _waited_on_per_group(graph, ev, cols: np.ndarray) -> int | None:
    """Among chip columns ``cols`` (one group in lock step), the one whose peer-wait share is lowest while
    the group's median waits at least twice as long; None when unclear."""
    if PEER_WAIT not in graph.metrics or len(cols) < 2:
        return None
    w = np.asarray(ev.per_chip[PEER_WAIT], np.float64).reshape(len(ev.chips), -1)[cols, 0]
    if not np.isfinite(w).all():
        return None
    i = int(np.argmin(w))
    return int(cols[i]) if np.median(w) >= 2 * w[i] + 1e-9 else None


def waited_on_per_host(graph, ev) -> list[int]:
    """In a capture of several hosts (each host's chips one group in lock step), the chip column each host
    waits for, where one stands out (a new user's fleet had slow chips on two hosts and the headline named
    one)."""
    hosts = getattr(ev, "hosts", None)
    if hosts is None or len({str(h) for h in hosts}) < 2:
        return []
    hosts = np.asarray([str(h) for h in hosts])
    out = []
    for h in dict.fromkeys(hosts):
        k = _waited_on_per_group(graph, ev, np.flatnonzero(hosts == h))
        if k is not None:
            out.append(k)
    return out


def headline(graph, ev, analysis, multichip: dict | None = None) -> dict | None:
    """``{"metric", "share", "message", "chip"}`` (share as a fraction of the chips' cycles; ``chip``:
    the chip waited on, or None), by the rule of the module docstring; None without a top-down tree."""
    m = graph.metrics.get(PEER_WAIT)
    if m is not None and m.threshold is not None:
        v = _value(ev.server[PEER_WAIT])
        # a `when parent` threshold is crossed only under a parent past its own; one whose parent has no value
        # (listed "not checked" among the thresholds) makes no headline
        crossed, _, _ = crossed_where(graph, PEER_WAIT, ev.server)
        if np.isfinite(v) and bool(crossed):
            chip = waited_on(graph, ev, multichip)
            col = _waited_on_column(graph, ev, multichip)
            per_host = waited_on_per_host(graph, ev) if multichip is None else []
            if per_host:  # a fleet: each host's group waits for its own slow chip
                col, chip = per_host[0], int(ev.chips[per_host[0]])
            names = [chip_names(ev)[k] for k in per_host] or ([chip_names(ev)[col]] if col is not None else [])
            who = f"chip {', '.join(names)}" if names else f"chip {chip}" if chip is not None else None
            out = {
                "metric": PEER_WAIT,
                "share": v / 100.0,
                "chip": chip,
                "message": f"waiting for {who or 'a slower chip'} at collectives: {v:.1f} % of the chips' cycles "
                f"(the group runs at its slowest chip's pace)",
            }
            if col is not None and getattr(ev, "hosts", None) is not None:
                out["host"] = str(ev.hosts[col])
            if len(per_host) > 1:
                out["waited_on"] = names
            return out
    if analysis.drilldown:
        name, share = analysis.drilldown[-1]
        thr = graph.metrics[name].threshold
        return {
            "metric": name,
            "share": share,
            "chip": None,
            "message": f"{thr[2] if thr else name}: {share * 100:.1f} % of the chips' cycles",
        }
    if analysis.bottleneck:
        v = analysis.topdown[analysis.bottleneck]
        return {
            "metric": analysis.bottleneck,
            "share": v / 100.0,
            "chip": None,
            "message": f"{analysis.bottleneck_label}: {v:.1f} % of the chips' cycles",
        }
    return None


__all__ = ["PEER_WAIT", "headline", "waited_on"]
