"""The report's notes on per-op rows the attribution cannot pin down (``analysis.roofline``'s
``determined: false``): which counters of which op classes the windows cannot tell apart, how far off they
may be, and the cure."""

from __future__ import annotations

from .attribution import GroupTotals
from .roofline import _amount, signal_sets

WORDS = {"hbm_bytes": "HBM bytes", "matrix_flops": "matrix FLOPs", "vector_flops": "vector FLOPs"}


def undetermined_notes(gen, totals: GroupTotals, rows: list[dict]) -> list[str]:
    """The report notes on the op rows that are not ``determined``: which counters of which op classes the
    windows cannot tell apart, how far off they may be, and the cure (op-boundary snapshots)."""
    loose = [r for r in rows if not r.get("determined", True)]
    amounts = [r for r in loose if r["undetermined"] != ["side"]]
    sides = [r for r in loose if r["undetermined"] == ["side"]]
    sets = signal_sets(gen)
    cure = (
        "op-boundary counter snapshots give exact per-op figures (perfonto run --op-snapshots, "
        "perfonto analyze --snapshots)"
    )
    out = []
    if amounts:
        keys = [x for x in WORDS if any(x in r["undetermined"] for r in amounts)]
        counters = [n for x in keys for n in sets[x] if n in totals.sums]
        key = "hbm_bytes" if "hbm_bytes" in keys else keys[0]
        unit = "B" if key == "hbm_bytes" else "FLOP"
        rel = []  # the named ops' error estimates of that amount, relative to it
        for r in amounts[:NAMED]:
            k = totals.groups.index(r["op"])
            a, e = (_amount(totals, sets[key], k, gen, unit, w) for w in ("sums", "estimate"))
            if key in r["undetermined"] and a > 0:
                rel.append(e / a)
        size = (
            f"error estimates of their {WORDS[key]} {min(rel) * 100:,.0f} % to {max(rel) * 100:,.0f} % of the "
            "attributed amounts"
            if rel
            else "error estimates larger than the amounts"
        )
        out.append(
            f"per-op figures not determined for {_names(amounts)}: the counter windows cannot tell their "
            f"{', '.join(WORDS[x] for x in keys)} ({', '.join(counters)}) apart — they hold these op classes in "
            "nearly fixed proportions (ops that always run together, or every step alike as under a closed loop), "
            f"or no rate per op class fits them, so the split among them is not pinned down ({size}, report.json "
            "ops.rows[].error); their work, intensity, roofline side and top-down bound are left out "
            f"(ops.rows[].determined: false); {cure}"
        )
    if sides:
        out.append(
            f"roofline side not determined for {_names(sides)}: within the attribution's error estimates their "
            f"intensity can lie on either side of the ridge point (ops.rows[].undetermined: side); {cure}"
        )
    return out


NAMED = 8  # op classes a note names


def _names(rows: list[dict], most: int = NAMED) -> str:
    return ", ".join(r["op"] for r in rows[:most]) + (f" and {len(rows) - most} more" if len(rows) > most else "")


__all__ = ["undetermined_notes"]
