"""The multi-chip section of the terminal report, on the aligned host timeline: the straggler and the
chip time others wait for it, collective waits, per-step skew, load imbalance, PCIe and link saturation."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from .report_format import ms_text, pct

__all__ = ["render_multichip", "straggler_wait"]


def _wait_table(mc: dict, coll: dict, console: Console) -> None:
    t = Table(title="Collective wait per chip (arrival to the last chip's arrival)", title_justify="left")
    t.add_column("chip", justify="right")
    t.add_column("wait", justify="right")
    t.add_column("share of run", justify="right")
    t.add_column("waits mostly for", justify="left")
    dur = mc.get("duration_s", 0) or 1.0
    for c, w in enumerate(coll["wait_s"]):
        wf = coll["waits_for"].get(str(c), {})
        top = max(wf, key=wf.get) if wf else None
        t.add_row(
            str(c),
            ms_text(w),
            pct(w / dur, 2),
            f"chip {top} ({pct(wf[top] / w, 0)})" if top is not None and w > 0 else "—",
        )
    console.print(t)


def straggler_wait(st: dict, chips: int, duration_s: float | None) -> str:
    """The wait a straggler causes, as chip time: the sum over the other chips, each one's mean and its share
    of the run (a sum of 735 ms over 7 chips in a 1.1 s run read like wall time)."""
    others = max(chips - 1, 1)
    each = st["blamed_wait_s"] / others
    of_run = f", {pct(each / duration_s, 1)} of the {duration_s:.3f} s run" if duration_s else ""
    return (
        f"the {others} other chip(s) wait for it {ms_text(st['blamed_wait_s'])} of chip time in collectives, "
        f"{ms_text(each)} each on average{of_run} ({pct(st['share'], 0)} of all collective wait)"
    )


def render_multichip(mc: dict, console: Console) -> None:
    """The multi-chip section, from ``perfonto.crosschip.analyse``: the straggler (or that there is
    none), each chip's collective wait and whom it waits for, the per-step skew, load imbalance
    (1 − mean/max) across and within chips, slow links, and the windows where PCIe or a link
    saturates (host time)."""
    chips = mc.get("chips", 0)
    coll = mc.get("collective")
    console.print(f"[bold]Multi-chip[/bold] ({chips} chips, on the host timeline)")
    al = mc.get("alignment", {})
    if "error_ns" in al:
        e = al["error_ns"]
        console.print(
            f"  clocks aligned from the sync reads: error median {e['median']:.0f} ns, p99 {e['p99']:.0f} ns "
            f"over {al['samples']:,} timestamps"
        )
    if coll:
        st = coll.get("straggler")
        if st:
            wait = straggler_wait(st, chips, coll.get("duration_s"))
            console.print(f"  [bold red]Straggler: chip {st['chip']}[/bold red] — {wait}")
        else:
            console.print(
                f"  no straggler: collective wait is {pct(coll['wait_share_of_time'], 2)} of the chips' time"
                + (" (within the clock-alignment noise)" if coll["wait_share_of_time"] < 1e-3 else "")
            )
        if st or coll["wait_share_of_time"] >= 1e-3:
            _wait_table(mc, coll, console)
        sk = coll["skew"]
        console.print(
            f"  per-step skew (largest arrival spread at a collective): median {ms_text(sk['arrival_p50_s'])}, "
            f"max {ms_text(sk['arrival_max_s'])} over {sk['steps']} steps that hold a collective in the trace "
            "(whole or in part); forward-pass start skew max "
            f"{ms_text(sk['exec_start_max_s'])}"
        )
    if mc.get("counters_skipped"):  # a device-clock reset in the counters (analysis.crosschip.analyse)
        console.print(f"  {mc['counters_skipped']}", style="yellow", markup=False, highlight=False)
    imb = mc.get("imbalance", {})
    if imb:
        from perfonto.analysis.chip_load import IMBALANCE_LABEL, imbalance_note

        label = lambda b: IMBALANCE_LABEL.get(b, b)  # noqa: E731
        across = ", ".join(f"{label(b)} {pct(v)}" for b, v in imb.get("across_chips", {}).items())
        within = ", ".join(
            f"{label(b)} {pct(d['value'])} (chip {d['chip']})" for b, d in imb.get("within_chip", {}).items()
        )
        console.print(f"  imbalance 1 − mean/max across chips (busy time or work): {across}")
        note = imbalance_note(imb.get("across_chips", {}))
        if note:
            console.print(f"    {note}")
        if within:
            console.print(f"  imbalance across instances within a chip (worst chip): {within}")
    for sl in mc.get("slow_links", [])[:4]:
        console.print(
            f"  [bold red]Slow link: chip {sl['chip']} link {sl['link']}[/bold red] carries its bytes at "
            f"{pct(sl['rate_ratio'], 0)} of the median link's rate (busy {ms_text(sl['busy_s'])} vs "
            f"{ms_text(sl['median_busy_s'])})"
        )
    sat = mc.get("saturation", {})
    if sat:
        ivs = sat.get("intervals", [])
        if not ivs:
            console.print(
                f"  no PCIe or link window at or above {sat['threshold'] * 100:.0f} % "
                f"(peaks: PCIe {pct(sat['pcie_util_max'])}, link {pct(sat['link_util_max'])})"
            )
        elif sat.get("per_chip"):  # one line per chip and kind; the merged ranges are in report.json
            console.print(
                f"  {sat['count']} saturated interval(s) (≥ {sat['threshold'] * 100:.0f} % of a window; counted per "
                "link and PCIe port, each a run of windows), merged per chip:"
            )
            for r in sat["per_chip"][:8]:
                what = f"chip {r['chip']} PCIe" if r["kind"] == "pcie" else f"chip {r['chip']} links {r['links']}"
                console.print(
                    f"    {what}: {r['windows']} window(s) in {r['bursts']} burst(s), {r['first_s'] * 1e3:,.1f} – "
                    f"{r['last_s'] * 1e3:,.1f} ms, peak {pct(r['peak_util'])}"
                )
            if len(sat["per_chip"]) > 8:
                console.print(f"    … {len(sat['per_chip']) - 8} more chip/kind(s) in report.json")
        else:
            console.print(f"  {sat['count']} saturated interval(s) (≥ {sat['threshold'] * 100:.0f} % of a window):")
            for iv in ivs[:8]:
                what = f"chip {iv['chip']} PCIe" if iv["kind"] == "pcie" else f"chip {iv['chip']} link {iv['link']}"
                console.print(
                    f"    {what}: {iv['start_s'] * 1e3:,.3f} – {iv['end_s'] * 1e3:,.3f} ms "
                    f"({iv['windows']} window(s), peak {pct(iv['peak_util'])})"
                )
            if len(ivs) > 8:
                console.print(f"    … {sat['count'] - 8} more in report.json")
