"""The cautions of the terminal report that the HTML page printed nowhere, from ``report.json``: the null window
values (which metrics could not be computed in how many windows, and why), the run-level values over part of the
run, how many forward passes the run holds (few: token rates are spiky), the device trace's time split, the
clock-alignment error and the imbalance within a chip, and the op classes whose roofline side and bound differ.
The words are the terminal's (``perfonto.report``, ``report_multichip``, ``report_ops``)."""

from __future__ import annotations

from .html_report import e

#: the top-down node each roofline side stands for (``perfonto.report_ops``)
_SAME = {"memory": "topdown.memory_bound", "compute": "topdown.compute_bound", "link": "topdown.interconnect_bound"}


def _pct(v: float, digits: int = 1) -> str:
    return f"{v * 100:.{digits}f} %"


def run_cautions(r: dict) -> str:
    """The notes section's cautions (HTML, escaped): forward passes, time split, null windows, partial coverage."""
    out = []
    fp = r.get("forward_passes") or {}
    steps = fp.get("steps")
    if isinstance(steps, (int, float)) and not isinstance(steps, bool) and 0 < steps < 20:
        out.append(
            f'<p class="warn" id="forward-passes">{int(steps)} whole forward passes in the run (it ends where a step '
            "ends, so run-level token rates count every step's tokens); token counters advance when a step ends, so "
            "window-level token rates are spiky — run longer for more steps.</p>"
            if fp.get("whole")
            else f'<p class="warn" id="forward-passes">only {int(steps)} forward passes finished in the run; token '
            "counters advance when a step ends, so window-level token rates are spiky and run-level ones uncertain by "
            f"about {100 / steps:.0f} % — run longer for steadier serving figures.</p>"
        )
    ts = r.get("time_split") or {}
    if ts and all(isinstance(v, (int, float)) for v in ts.values()):
        out.append(
            '<p id="time-split">Time split (device trace, unions of spans, all chips): '
            + e(", ".join(f"{k.replace('_', ' ')} {_pct(v)}" for k, v in ts.items()))
            + f" (sum {sum(ts.values()) * 100:.1f} %; compute: the spans of every compute op, the memory-bound ones "
            "included, which top-down counts as memory).</p>"
        )
    nulls = r.get("null_windows") or {}
    if isinstance(nulls, dict) and nulls:
        items = "".join(
            f"<li><code>{e(k)}</code>: {e(', '.join(f'{n} {why}' for why, n in (v or {}).items()))}</li>"
            for k, v in sorted(nulls.items())
            if isinstance(v, dict)
        )
        out.append(
            "<p>Null window values (not computable; never NaN or a made-up number; a window with no event of a "
            "denominator, e.g. no step ending in it, is one; the run-level values divide the run's totals and keep "
            f'their value):</p><ul id="null-windows">{items}</ul>'
        )
    cov = r.get("coverage") or {}
    if isinstance(cov, dict) and cov:
        items = "".join(f"<li><code>{e(k)}</code>: {e(_pct(c))} of the run</li>" for k, c in sorted(cov.items()))
        out.append(
            "<p>Run-level values over part of the run (windows with invalid inputs left out of numerator and "
            f'denominator):</p><ul id="coverage">{items}</ul>'
        )
    return "".join(out)


def multichip_cautions(mc: dict) -> str:
    """The multi-chip section's clock-alignment error and imbalance within a chip (HTML, escaped)."""
    from .chip_load import IMBALANCE_LABEL

    out = []
    al = mc.get("alignment") or {}
    err = al.get("error_ns") if isinstance(al, dict) else None
    if isinstance(err, dict) and {"median", "p99"} <= set(err):
        out.append(
            f'<p id="clock-alignment">Clocks aligned from the sync reads: error median {err["median"]:.0f} ns, p99 '
            f"{err['p99']:.0f} ns over {al.get('samples', 0):,} timestamps.</p>"
        )
    within = ((mc.get("imbalance") or {}).get("within_chip")) or {}
    if within:
        text = ", ".join(
            f"{IMBALANCE_LABEL.get(b, b)} {_pct(d['value'], 2)} (chip {d['chip']})"
            for b, d in within.items()
            if isinstance(d, dict) and isinstance(d.get("value"), (int, float))
        )
        if text:
            out.append(f"<p>Imbalance across instances within a chip (worst chip): {e(text)}.</p>")
    return "".join(out)


def side_bound_note(rows: list[dict]) -> str:
    """The op classes whose roofline side and bound (cycles) differ, and why both can be right (HTML)."""
    differ = [r for r in rows if r.get("side") and r.get("bound") and _SAME.get(r["side"]) != r["bound"]]
    if not differ:
        return ""
    ops = ", ".join(str(r.get("op")) for r in differ)
    return (
        f'<p class="dim" id="side-bound">Roofline side and bound differ for {e(ops)}: the side is where the '
        "op's intensity lies against the ridge point (the roofs it could reach); the bound is where its cycles "
        "went (top-down), what the chip did. Near the ridge both roofs are close and the cycles decide.</p>"
    )


__all__ = ["multichip_cautions", "run_cautions", "side_bound_note"]
