"""A block's counter slots and group constraints resolved (issue 29): what ``perfonto plan``
(``metrics.plan_groups``) packs a set of metrics' counters into.

The written form is ``ontology.model.CounterSlots`` and ``GroupConstraint``; the resolved form is a
plain dict kept in ``Generation.blocks[<block>]["counter_slots"]``::

    {"programmable": int, "fixed": (full name, ...), "provenance": str, "source": str, "span": Span,
     "together": ((full names, Span), ...), "apart": ((full names, Span), ...)}

Every name must be a counter (or histogram) of the block; anything else is a ``counter-slots`` error
at the name's place, and so are ``group_constraints`` on a block without ``counter_slots`` (which
reads every counter at once). A name that an inherited list holds and the child generation made wrong
(turned into a gauge, renamed out of the block) is reported at the child's line, naming the parent's.
Whether the constraints can be met with the slots a plan is given (a
``together`` group larger than the slots, a ``together`` group two of whose counters must be
``apart``) depends on the slot count (``perfonto plan --slots N``) and is checked by the planner.
"""

from __future__ import annotations

from .diagnostics import Diagnostic, did_you_mean

SLOTTED_KINDS = ("counter", "histogram")  # kinds a PMU reads through a counter slot; gauges and packed are read apart


def resolve_counter_slots(bname: str, block, src, diags: list[Diagnostic], gf=None) -> dict | None:
    """``block``'s ``counter_slots`` and ``group_constraints`` resolved (module docstring), or None when it
    declares neither. Names that are not counters of the block are reported in ``diags`` and left out;
    an inherited name that ``gf`` (the renames and removals down the chain) renames follows the rename,
    one it removes (under either name) is dropped, and so is a group constraint left with one counter by
    a removal. An inherited list that the child made wrong is reported at the child's line."""
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
        if len(set(names)) < 2 and _removed_any(bname, getattr(gc, key), renamed, removed):
            continue  # the generation removed one of its counters: nothing is left to keep together or apart
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


def _removed_any(bname: str, names, renamed: dict, removed: set) -> bool:
    """Whether a name of ``names`` (short names of block ``bname``) is of a removed signal, under its
    own name or the one a rename gave it."""
    fulls = [f"{bname}.{n}" for n in names]
    return any(f in removed or renamed.get(f) in removed for f in fulls)


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
    """Full names of the short names in ``names`` that are counters of the block (``moved``: the
    renames down the chain, old → new full name, and removals); a name renamed and then removed is
    dropped as a removed one is; the others reported (``_wrong_name``)."""
    renamed, removed = moved
    ok = []
    for j, n in enumerate(names):
        full = renamed.get(f"{bname}.{n}", f"{bname}.{n}")
        if full in removed or f"{bname}.{n}" in removed:
            continue
        if full.startswith(f"{bname}."):
            n = full.split(".", 1)[1]
        sig = block.signals.get(n)
        if sig is not None and sig.kind in SLOTTED_KINDS:
            ok.append(f"{bname}.{n}")
            continue
        rest = [m for m in names if m != names[j]]
        diags.append(_wrong_name(bname, block, (n, full), sig, (loc + (j,), rest), src, what))
    return ok


def _wrong_name(bname: str, block, names: tuple[str, str], sig, where: tuple, src, what: str) -> Diagnostic:
    """The error for a name of a list that is not a counter of the block (``names``: as the list reads
    after renames, and its full current name; ``where``: the entry's location and the list's other
    names). When the list is inherited and this file (``src.path``, the child) made the name wrong —
    turned the signal into another kind, or renamed it into another block — the error is at the
    child's line, naming the parent's, and says to override the list here."""
    n, full = names
    loc, rest = where
    counters = [k for k, s in block.signals.items() if s.kind in SLOTTED_KINDS]
    at = src.span(loc)
    if what == "counter_slots.fixed":
        override = f"override it in this file: `blocks: {{{bname}: {{counter_slots: {{fixed: [{', '.join(rest)}]}}}}}}`"
    else:
        override = f"override `group_constraints` of block `{bname}` in this file without `{n}`"
    if sig is not None:
        kind_at = src.positions.get(("blocks", bname, "signals", n, "kind"))
        if at.file != src.path and kind_at is not None and kind_at.file == src.path:
            return Diagnostic(
                "error",
                "counter-slots",
                f"`{bname}.{n}` is a {sig.kind} here, read without a counter slot, but the inherited "
                f"`{what}` of block `{bname}` ({at}) lists it",
                kind_at,
                hint=f"{override}, or keep `{bname}.{n}` a counter",
            )
        why = f"is a {sig.kind}, read without a counter slot"
    else:
        own = src.data.get("renamed") if isinstance(src.data, dict) else None  # this file's renames
        old = next((k for k, v in (own if isinstance(own, dict) else {}).items() if v == full), None)
        renamed_at = src.span(("renamed", old)) if old is not None else None
        if at.file != src.path and renamed_at is not None and renamed_at.file == src.path:
            return Diagnostic(
                "error",
                "counter-slots",
                f"this file renames `{old}` to `{full}`, out of block `{bname}`, but the inherited `{what}` of "
                f"block `{bname}` ({at}) lists it" + (f" (as `{n}`)" if f"{bname}.{n}" != old else ""),
                renamed_at,
                hint=f"{override}, or rename it within block `{bname}`",
            )
        why = "is not a signal of the block"
    return Diagnostic(
        "error",
        "counter-slots",
        f"block `{bname}`: `{n}` in `{what}` {why}",
        at,
        hint=did_you_mean(n, counters) or f"name a counter of `{bname}`: {', '.join(counters)}",
    )
