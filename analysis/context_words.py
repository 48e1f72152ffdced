"""An emulated run's modelling assumptions and its comparison with a public claim, in the words both
reports print (the terminal's ``perfonto.report_claim`` and the HTML page's ``analysis.html_context``), from
``emulator.claim.run_context``'s dict as ``report.json`` keeps it (``assumptions``, ``preset_says``,
``claim``)."""

from __future__ import annotations


def context_lines(ctx: dict | None) -> list[tuple[str, str]]:
    """``[(kind, text)]`` of ``ctx`` (module docstring): the run's own assumptions, then the preset's in its
    words with their reasons, then the claim, its scenario under the run's preset and each assumption moved
    alone toward the claim preset's setting; empty without a context. ``kind``, for each report to style:
    ``head``, ``item`` (of a list), ``subhead``, ``subitem``, ``line``, ``factor`` (``× 2.27  what``), ``most``
    (the one that moves it most), ``remark``."""
    if not ctx:
        return []
    says = ctx.get("preset_says") or []
    c = ctx.get("claim")
    out = [("head", "Modelling assumptions (what shapes these numbers), as this run made them:")]
    out += [("item", a) for a in ctx.get("assumptions") or [] if a not in says]
    if says:  # the same choices in the preset's words, with their reasons (one list read as repeats)
        preset = ctx.get("preset") or (c or {}).get("preset")  # a report.json from before `preset`: the claim's
        out.append(("subhead", f"as the preset{f' `{preset}`' if preset else ''} states them, with their reasons:"))
        out += [("subitem", a) for a in says]
    return out + (_claim_lines(c) if c else [])


def _claim_lines(c: dict) -> list[tuple[str, str]]:
    """The claim and how far the run and the claim's scenario are from it."""
    cl = c["claim"]
    out = [
        (
            "head",
            f"Public claim: more than {cl['tokens_per_second']:,} tokens/s (input + output), {cl['model']} on "
            f"{cl['chips']} chips, {str(cl['dtype']).upper()}, {cl['isl']}/{cl['osl']}",
        ),
        ("line", f"source: {cl['source']}"),
    ]
    if c.get("scenario_matches") and c.get("run_ratio") is not None:
        few = c.get("run_steps") is not None and c["run_steps"] < 20 and not c.get("whole_steps")
        out.append(
            (
                "line",
                f"this run: {c['run_tokens_per_second']:,.0f} tokens/s = {c['run_ratio']:.2f} × the claim"
                + (f" (over only {c['run_steps']} forward passes: run longer for a steady figure)" if few else ""),
            )
        )
    else:
        out.append(("line", "this run is another scenario than the claim's; the claim's scenario projected instead:"))
    out.append(
        (
            "line",
            f"the claim's scenario under preset `{c['preset']}`: {c['tokens_per_second']:,.0f} tokens/s at full load "
            f"= {c['ratio']:.2f} × the claim ({'reaches' if c['reaches'] else 'falls short of'} it)",
        )
    )
    if c.get("changes"):
        out.append(("line", "one assumption at a time, moved to the claim preset's setting (× the projection):"))
        out += [("factor", f"× {ch['factor']:.2f}  {ch['what']}") for ch in c["changes"]]
        out.append(("most", f"moves it most: {c['moves_most']}"))
    return out + [("remark", c["note"])]


__all__ = ["context_lines"]
