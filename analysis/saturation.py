"""Saturated PCIe and link windows (``analysis.crosschip``) summarised for a reader: one line per chip
and kind instead of one per window and link.

``ranges``: intervals that share a chip, a kind and a time range are one range naming all their links
(``links`` as compact text, ``0–11`` or ``0, 3, 5``); ``per_chip``: per chip and kind, the links that ever
saturate, how many windows and bursts, the first and last time and the peak utilisation.
"""

from __future__ import annotations

from collections import defaultdict

__all__ = ["compact", "ranges", "per_chip"]


def compact(ids: list[int]) -> str:
    """``[0, 1, 2, 3, 5, 7, 8]`` → ``"0–3, 5, 7–8"``."""
    ids = sorted(set(ids))
    out, start = [], None
    for i, x in enumerate(ids):
        if start is None:
            start = x
        if i + 1 == len(ids) or ids[i + 1] != x + 1:
            out.append(str(start) if start == x else f"{start}–{x}")
            start = None
    return ", ".join(out)


def ranges(intervals: list[dict]) -> list[dict]:
    """Intervals of one chip, kind and time range merged into one (``links`` compact), in time order."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for iv in intervals:
        groups[(iv["kind"], iv["chip"], iv["start_s"], iv["end_s"])].append(iv)
    out = []
    for (kind, chip, t0, t1), ivs in groups.items():
        links = [iv["link"] for iv in ivs if "link" in iv]
        out.append(
            {
                "kind": kind,
                "chip": chip,
                "links": compact(links) if links else None,
                "start_s": t0,
                "end_s": t1,
                "windows": max(iv["windows"] for iv in ivs),
                "peak_util": max(iv["peak_util"] for iv in ivs),
            }
        )
    out.sort(key=lambda r: (r["start_s"], r["chip"], r["kind"]))
    return out


def per_chip(intervals: list[dict]) -> list[dict]:
    """Per chip and kind: ``links`` (compact), ``bursts`` (merged ranges), ``windows`` (saturated windows
    of the busiest link), ``first_s``, ``last_s``, ``peak_util``; busiest chips first."""
    by: dict[tuple, list[dict]] = defaultdict(list)
    for r in ranges(intervals):
        by[(r["kind"], r["chip"])].append(r)
    link_windows: dict[tuple, dict] = defaultdict(lambda: defaultdict(int))
    for iv in intervals:
        link_windows[(iv["kind"], iv["chip"])][iv.get("link")] += iv["windows"]
    out = []
    for (kind, chip), rs in by.items():
        links = sorted(k for k in link_windows[(kind, chip)] if k is not None)
        out.append(
            {
                "kind": kind,
                "chip": chip,
                "links": compact(links) if links else None,
                "bursts": len(rs),
                "windows": max(link_windows[(kind, chip)].values()),
                "first_s": rs[0]["start_s"],
                "last_s": rs[-1]["end_s"],
                "peak_util": max(r["peak_util"] for r in rs),
            }
        )
    out.sort(key=lambda r: (-r["windows"], r["chip"], r["kind"]))
    return out
