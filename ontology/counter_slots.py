"""A block's counter slots and group constraints resolved (issue 29): what ``perfonto plan``
(``metrics.plan_groups``) packs a set of metrics' counters into.

The written form is ``ontology.model.CounterSlots`` and ``GroupConstraint``; the resolved form is a
plain dict kept in ``Generation.blocks[<block>]["counter_slots"]``::

    {"programmable": int, "fixed": (full name, ...), "provenance": str, "source": str, "span": Span,
     "together": ((full names, Span), ...), "apart": ((full names, Span), ...)}

Every name must be a counter (or histogram) of the block; anything else is a ``counter-slots`` error
at the name's place, and so are ``group_constraints`` on a block without ``counter_slots`` (which
reads every counter at once). Whether the constraints can be met with the slots a plan is given (a
``together`` group larger than the slots, a ``together`` group two of whose counters must be
``apart``) depends on the slot count (``perfonto plan --slots N``) and is checked by the planner.
"""

from __future__ import annotations

from .diagnostics import Diagnostic, did_you_mean

SLOTTED_KINDS = ("counter", "histogram")  # kinds a PMU reads through a counter slot; gauges and packed are read apart


def resolve_counter_slots(bname: str, block, src, diags: list[Diagnostic], gf=None) -> dict | None:
    """``block``'s ``counter_slots`` and ``group_constraints`` resolved (module docstring), or None when it
    declares neither. Names that are not counters of the block are reported in ``diags`` and left out;
    an inherited name that ``gf`` (the generation file) renames follows the rename, one it removes is
    dropped."""
    if block.counter_slots is None and not block.group_constraints:
        return None
    renamed = dict(getattr(gf, "renamed", None) or {})
    removed = set(getattr(gf, "removed", None) or ())
    loc = ("blocks", bname)
    cs = block.counter_slots
    if cs is None:
        diags.append(
            Diagnostic(
                "error",
                "counter-slots",
                f"block `{bname}`: group_constraints without counter_slots: a block without counter_slots reads "
                "every counter at once, so its rules would be ignored",
                src.span(loc + ("group_constraints",)),
                hint="declare `counter_slots: {programmable: N}` (N: the counters the block reads at once) beside them",
            )
        )
        return None
    out: dict = {
        "programmable": cs.programmable if cs is not None else None,
        "fixed": (),
        "provenance": cs.provenance.value if cs is not None else "",
        "source": cs.source if cs is not None else "",
        "span": src.span(loc + ("counter_slots",)),
        "together": (),
        "apart": (),
    }
    if cs is not None:
        out["fixed"] = tuple(
            _names(
                bname,
                block,
                (renamed, removed),
                cs.fixed,
                loc + ("counter_slots", "fixed"),
                src,
                diags,
                "counter_slots.fixed",
            )
        )
    together: list[tuple[tuple[str, ...], object]] = []
    apart: list[tuple[tuple[str, ...], object]] = []
    for i, gc in enumerate(block.group_constraints):
        gloc = loc + ("group_constraints", i)
        if bool(gc.together) == bool(gc.apart):
            diags.append(
                Diagnostic(
                    "error",
                    "counter-slots",
                    f"block `{bname}`: a group constraint holds {'both' if gc.together else 'neither'} "
                    f"`together` {'and' if gc.together else 'nor'} `apart`",
                    src.span(gloc),
                    hint="write one rule per entry: `{together: [a, b]}` or `{apart: [a, b]}`",
                )
            )
            continue
        key = "together" if gc.together else "apart"
        names = _names(
            bname,
            block,
            (renamed, removed),
            getattr(gc, key),
            gloc + (key,),
            src,
            diags,
            f"group_constraints[{i}].{key}",
        )
        if key == "apart" and _fixed_apart(bname, gc.apart, out["fixed"], gloc, src, diags, i):
            continue
        if len(set(names)) < 2:
            diags.append(
                Diagnostic(
                    "error",
                    "counter-slots",
                    f"block `{bname}`: `{key}` needs two or more counters, got {len(set(names))}",
                    src.span(gloc + (key,)),
                    hint="name two or more counters of the block",
                )
            )
            continue
        (together if key == "together" else apart).append((tuple(dict.fromkeys(names)), src.span(gloc + (key,))))
    out["together"], out["apart"] = tuple(together), tuple(apart)
    return out


def _fixed_apart(bname: str, names, fixed, loc: tuple, src, diags: list[Diagnostic], i: int) -> bool:
    """Report the fixed counters an ``apart`` rule names (a fixed counter counts in every group, so nothing
    can be kept apart from it); True when there was one."""
    bad = [(j, n) for j, n in enumerate(names) if f"{bname}.{n}" in fixed]
    for j, n in bad:
        diags.append(
            Diagnostic(
                "error",
                "counter-slots",
                f"block `{bname}`: `{n}` in `group_constraints[{i}].apart` is a fixed counter: it counts in every "
                "group, so no counter can be kept apart from it",
                src.span(loc + ("apart", j)),
                hint=f"drop `{n}` from the `apart` rule, or from `counter_slots.fixed`",
            )
        )
    return bool(bad)


def _names(bname: str, block, moved, names, loc: tuple, src, diags: list[Diagnostic], what: str) -> list[str]:
    """Full names of the short names in ``names`` that are counters of the block (``moved``: the file's
    renames, old → new full name, and removals); the others reported."""
    renamed, removed = moved
    ok = []
    for j, n in enumerate(names):
        full = f"{bname}.{n}"
        if full in removed:
            continue
        if full in renamed and renamed[full].startswith(f"{bname}."):
            n = renamed[full].split(".", 1)[1]
        sig = block.signals.get(n)
        if sig is not None and sig.kind in SLOTTED_KINDS:
            ok.append(f"{bname}.{n}")
            continue
        why = f"is a {sig.kind}, read without a counter slot" if sig is not None else "is not a signal of the block"
        counters = [k for k, s in block.signals.items() if s.kind in SLOTTED_KINDS]
        diags.append(
            Diagnostic(
                "error",
                "counter-slots",
                f"block `{bname}`: `{n}` in `{what}` {why}",
                src.span(loc + (j,)),
                hint=did_you_mean(n, counters) or f"name a counter of `{bname}`: {', '.join(counters)}",
            )
        )
    return ok
