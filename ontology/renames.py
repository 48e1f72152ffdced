"""``removed:`` and ``renamed:`` of a generation that ``extends`` another (``ontology.extends``): each
entry applied to the parent's merged signals, and what it does to the lineage.

A rename gives a signal a name no signal has: a target that is already a signal of the parent, or
that the same file declares as a new signal (an entry with ``kind``), or that two renames share, is a
``rename-target`` error at the ``renamed:`` entry. (Before, the rename merged the two signals, and
every metric reading the target silently read the renamed register.) An entry under the new name
that writes no ``kind`` overrides keys of the renamed signal.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from .diagnostics import Diagnostic, did_you_mean
from .yaml_source import YamlSource

if TYPE_CHECKING:
    from .extends import Lineage


def split_name(name: str) -> tuple[str, str] | None:
    """``block.signal`` split at its first dot, or None for a name without one."""
    if name.count(".") < 1:
        return None
    block, sig = name.split(".", 1)
    return block, sig


def signal_names(data: dict) -> set[str]:
    """The full names of the signals of the merged generation ``data``."""
    out = set()
    for b, block in (data.get("blocks") or {}).items():
        if isinstance(block, dict):
            for s in block.get("signals") or {}:
                out.add(f"{b}.{s}")
    return out


def _has_signal(blocks: dict, sp: tuple[str, str] | None) -> bool:
    """Whether the split name (block, signal) names a signal of `blocks`."""
    return sp is not None and sp[0] in blocks and sp[1] in (blocks[sp[0]].get("signals") or {})


def _move_positions(pos: dict, old: tuple, new: tuple) -> None:
    for k in [k for k in pos if k[: len(old)] == old]:
        pos[new + k[len(old) :]] = pos.pop(k)


def _renamed_hint(name: str, lineage: Lineage, data: dict) -> str:
    """The hint for a ``removed``/``renamed`` entry naming no signal: the current name of a signal an
    ancestor renamed, else a did-you-mean."""
    if name in lineage.aliases:
        new = lineage.aliases[name]
        return f"`{name}` was renamed to `{new}` in `{lineage.renamed_in.get(name, 'a parent')}`: write `{new}`"
    return did_you_mean(name, signal_names(data)) or "list full names `block.signal`"


def apply_removal(src: YamlSource, data: dict, lineage: Lineage, gname: str, removed, diags: list) -> None:
    """Delete one signal listed under ``removed`` (an error when the parent has no such signal)."""
    assert isinstance(src.data, dict), "_read_chain keeps the sources whose document is a mapping"
    sp = split_name(str(removed))
    blocks = data.get("blocks", {})
    if not _has_signal(blocks, sp):
        diags.append(
            Diagnostic(
                "error",
                "unknown-name",
                f"`removed`: the parent has no signal `{removed}`",
                src.span(("removed", src.data["removed"].index(removed))),
                hint=_renamed_hint(str(removed), lineage, data),
            )
        )
        return
    assert sp is not None, "_has_signal"
    del blocks[sp[0]]["signals"][sp[1]]
    lineage.removed[str(removed)] = gname


def apply_rename(
    src: YamlSource,
    data: dict,
    pos: dict,
    lineage: Lineage,
    parent: set[str],
    old,
    new,
    diags: list[Diagnostic],
) -> None:
    """Move one signal listed under ``renamed`` to its new name (errors when the old signal or the new
    block does not exist, or the new name is taken: module docstring); an entry the child writes
    under the new name without ``kind`` overrides keys of the moved signal. ``parent``: the full
    names of the parent's signals, before this file merged in."""
    so, sn = split_name(str(old)), split_name(str(new))
    blocks = data.get("blocks", {})
    loc = ("renamed", old)
    if not _has_signal(blocks, so):
        diags.append(
            Diagnostic(
                "error",
                "unknown-name",
                f"`renamed`: the parent has no signal `{old}`",
                src.span(loc + ("<key>",)),
                hint=_renamed_hint(str(old), lineage, data),
            )
        )
        return
    assert so is not None, "_has_signal"
    if not sn or sn[0] not in blocks:
        diags.append(
            Diagnostic(
                "error",
                "unknown-name",
                f"`renamed`: no block `{sn[0] if sn else new}` for the new name `{new}`",
                src.span(loc),
            )
        )
        return
    taken = _target_taken(src, pos, lineage, parent, str(old), str(new), sn)
    if taken is not None:
        diags.append(taken)
        return
    if sn[1] in (blocks[sn[0]].get("signals") or {}) and sn != so:
        existing = blocks[sn[0]]["signals"][sn[1]]
        moved = blocks[so[0]]["signals"].pop(so[1])
        merged = copy.deepcopy(moved)
        merged.update(existing)  # the child may override fields of the renamed signal
        blocks[sn[0]]["signals"][sn[1]] = merged
    else:
        blocks[sn[0]].setdefault("signals", {})[sn[1]] = blocks[so[0]]["signals"].pop(so[1])
        _move_positions(pos, ("blocks", so[0], "signals", so[1]), ("blocks", sn[0], "signals", sn[1]))
    _record_rename(lineage, str(old), str(new), lineage.chain[-1])


def _target_taken(
    src: YamlSource, pos: dict, lineage: Lineage, parent: set[str], old: str, new: str, sn: tuple[str, str]
) -> Diagnostic | None:
    """The ``rename-target`` error for a rename onto a name that is taken (a signal of the parent, or
    one this file declares as a new signal), located at the entry's new name; None when it is free."""
    assert isinstance(src.data, dict), "_read_chain keeps the sources whose document is a mapping"
    at = src.span(("renamed", old))
    if new in parent:
        pname = lineage.chain[-2] if len(lineage.chain) > 1 else "the parent"
        where = pos.get(("blocks", sn[0], "signals", sn[1]))
        return Diagnostic(
            "error",
            "rename-target",
            f"`renamed`: `{new}` is already a signal of `{pname}`"
            + (f" (declared at {where})" if where else "")
            + f": renaming `{old}` onto it would merge the two, and every metric reading `{new}` would read "
            f"`{old}`'s register",
            at,
            hint=f"rename `{old}` to a name no signal of `{pname}` has (is `{new}` a slip?); to retire `{new}`, "
            f"deprecate it (`stability: deprecated`) or list it under `removed:`, and keep `{old}` under its own name",
        )
    blk = (src.data.get("blocks") or {}).get(sn[0])
    entry = ((blk.get("signals") or {}) if isinstance(blk, dict) else {}).get(sn[1])
    if isinstance(entry, dict) and "kind" in entry:
        where = src.span(("blocks", sn[0], "signals", sn[1], "<key>"))
        return Diagnostic(
            "error",
            "rename-target",
            f"`renamed`: `{new}` is also declared as a new signal in this file (line {where.line}): the rename and "
            f"the declaration would merge into one signal",
            at,
            hint=f"keep one: drop this rename (and deprecate `{old}` with `stability: deprecated` if it is to go), or "
            f"drop `kind` from `{new}`'s entry and keep only the keys that change `{old}`'s (an entry under the new "
            "name without `kind` overrides the renamed signal)",
        )
    return None


def _record_rename(lineage: Lineage, old: str, new: str, gname: str) -> None:
    """The lineage after `old` became `new` in generation `gname`: the alias (older aliases of `old`
    follow it) and the first generation, which the new name keeps."""
    lineage.aliases[old] = new
    lineage.renamed_in[old] = gname
    for a, b in list(lineage.aliases.items()):
        if b == old:
            lineage.aliases[a] = new
    lineage.aliases.pop(new, None)  # a name given back (`c2c.replays: c2c.retries`) is a signal, not an alias
    if old in lineage.since:
        lineage.since[new] = lineage.since[old]


def duplicate_targets(src: YamlSource) -> list[Diagnostic]:
    """A ``rename-target`` error for each ``renamed:`` entry whose new name an earlier entry of the file
    already takes (two signals renamed to one name would merge)."""
    out: list[Diagnostic] = []
    seen: dict[str, str] = {}
    assert isinstance(src.data, dict), "_read_chain keeps the sources whose document is a mapping"
    for k, v in (src.data.get("renamed") or {}).items():
        if not isinstance(v, str):
            continue
        if v in seen:
            out.append(
                Diagnostic(
                    "error",
                    "rename-target",
                    f"`renamed`: `{k}` and `{seen[v]}` are both renamed to `{v}`",
                    src.span(("renamed", k)),
                    hint="give each signal its own new name; to keep one of the two, list the other under `removed:`",
                )
            )
        seen.setdefault(v, str(k))
    return out
