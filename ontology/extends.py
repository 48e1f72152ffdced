"""``extends`` between generations: merge a generation file onto its parent's, as written.

Rules (applied from the root of the chain down, one generation at a time):
- mappings merge key by key, recursively (a child that writes ``blocks.hbm.instances.stack: 8``
  changes only that); any other value written by the child replaces the parent's, and so does a
  signal's ``emulator`` binding as a whole (``emulator: null`` unbinds it), and so does ``report:``;
- ``removed: [blk.sig, ...]`` deletes the parent's signals (recorded, so metrics that need them are
  reported unavailable with the reason);
- ``renamed: {old: new}`` moves a signal to a new full name; the old name stays as a deprecated alias;
  a new name that is taken (a signal of the parent, or one the file declares anew) is an error
  (``ontology.renames``);
- a signal a generation declares again under a name an ancestor removed is no longer a removed one;
- ``generation``, ``description``, ``extends``, ``removed`` and ``renamed`` are never inherited.
- a signal the child gives another ``unit`` while the parent reads its unit per sample from a
  ``scale_field`` must restate ``scale_field`` (or write ``scale_field: null``): an error otherwise
  (``scale_field_overrides``), since the parent's field would scale the new unit silently.
Positions travel with the values, so an error in an inherited value points into the parent's file —
unless the child's ``kind`` or rename made the value wrong: then at the child's line
(``ontology.override_sites``, ``ontology.counter_slots``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

from .diagnostics import Diagnostic, Span, did_you_mean
from .model import IDENT_RE
from .renames import apply_removal, apply_rename, duplicate_targets, signal_names
from .yaml_source import YamlSource, read_yaml

NOT_INHERITED = ("generation", "description", "extends", "removed", "renamed")


@dataclass
class Lineage:
    """What the chain of generations did to the signals, for the resolved generation."""

    chain: list[str] = field(default_factory=list)  # root first, this generation last
    since: dict[str, str] = field(default_factory=dict)  # signal -> first generation with it
    removed: dict[str, str] = field(default_factory=dict)  # signal -> generation that removed it
    aliases: dict[str, str] = field(default_factory=dict)  # old name -> current name
    renamed_in: dict[str, str] = field(default_factory=dict)  # old name -> generation that renamed it
    ids: dict[str, int] = field(
        default_factory=dict
    )  # signal -> C header id (append-only, see ontology.model.Signal.id)
    id_errors: list[Diagnostic] = field(default_factory=list)
    # spec constant key (without `spec.`) -> its unit as the parent chain left it, before this generation
    parent_spec: dict[str, str] = field(default_factory=dict)


@dataclass
class Merged:
    source: YamlSource  # merged data and positions (positions point into the files of the chain)
    texts: dict[str, str]
    lineage: Lineage
    diagnostics: list[Diagnostic]


def _replaced_whole(loc: tuple) -> bool:
    """Values a child replaces rather than merges: a signal's emulator binding (``blocks.<b>.signals.<s>.emulator``),
    so that a child can change the kind of a binding or drop a term; and the ``report:`` declaration, so that
    a child's report is the one shown, not a mix of its and its parent's lists."""
    if loc == ("report",):
        return True
    return len(loc) == 5 and loc[0] == "blocks" and loc[2] == "signals" and loc[4] == "emulator"


def _under(pos: dict) -> dict[tuple, list[tuple]]:
    """Every prefix of ``pos``'s keys → the keys under it (itself included): which positions a replaced
    value takes with it, found without scanning every position for every key (a generation of 10,000
    signals took 164 s to merge that way)."""
    idx: dict[tuple, list[tuple]] = {}
    for k in pos:
        for n in range(1, len(k) + 1):
            idx.setdefault(k[:n], []).append(k)
    return idx


def _merge(base: dict, over: dict, base_pos: dict, over_pos: dict, prefix: tuple, idx: tuple | None = None) -> None:
    base_under, over_under = idx if idx is not None else (_under(base_pos), _under(over_pos))
    for key, val in over.items():
        loc = prefix + (key,)
        if isinstance(val, dict) and isinstance(base.get(key), dict) and not _replaced_whole(loc):
            base_pos[loc] = over_pos.get(loc, base_pos.get(loc))
            base_pos[loc + ("<key>",)] = over_pos.get(loc + ("<key>",), base_pos.get(loc + ("<key>",)))
            _merge(base[key], val, base_pos, over_pos, loc, (base_under, over_under))
        else:
            base[key] = copy.deepcopy(val)
            for k in base_under.get(loc, ()):  # the replaced value's positions (none added under it since)
                base_pos.pop(k, None)
            for k in over_under.get(loc, ()):
                base_pos[k] = over_pos[k]


def find_parent(name: str, child_path: Path, shipped: Path) -> Path | None:
    """The file of generation ``name``: ``name.yaml`` next to the child, or another YAML file there that
    declares ``generation: name`` (a parent is named by its generation, not only by its file), else the
    shipped ``name.yaml``; None when there is none."""
    p = child_path.parent / f"{name}.yaml"
    if p.exists() and p.resolve() != child_path.resolve():  # a copy of sohu.yaml that now extends sohu
        return p
    found = [
        q
        for q in sorted(child_path.parent.glob("*.yaml"))
        if q.resolve() != child_path.resolve()
        and not q.name.endswith((".findings.yaml", ".vectors.yaml"))
        and isinstance((src := read_yaml(q)).data, dict)
        and src.data.get("generation") == name
    ]
    if len(found) > 1:
        raise DuplicateParent(name, found)
    if found:
        return found[0]
    p = shipped / f"{name}.yaml"
    return p if p.exists() else None


class DuplicateParent(Exception):
    """Two files next to a child declare the generation it extends (``find_parent``)."""

    def __init__(self, name: str, paths: list[Path]):
        super().__init__(name)
        self.name, self.paths = name, paths


def load_chain(path: Path, shipped: Path) -> Merged:
    """Read ``path`` and its ``extends`` ancestors, and merge them (see the module docstring)."""
    diags: list[Diagnostic] = []
    texts: dict[str, str] = {}
    chain, failed = _read_chain(path, shipped, texts, diags)
    if failed is not None:
        return failed
    for src in chain:
        bad = _shape_errors(src)
        if bad:
            return Merged(chain[0], texts, Lineage(), diags + bad)
    chain.reverse()  # root first
    lineage = Lineage()
    data: dict = {}
    pos: dict = {}
    for src in chain:
        _merge_generation(src, data, pos, lineage, diags)
    last = chain[-1]
    merged = YamlSource(last.path, last.text, data, pos, [])
    return Merged(merged, texts, lineage, diags + lineage.id_errors)


def _read_chain(
    path: Path, shipped: Path, texts: dict[str, str], diags: list[Diagnostic]
) -> tuple[list[YamlSource], Merged | None]:
    """The sources from ``path`` up its ``extends`` parents (this file first), their texts into `texts`;
    the second item is the failed result when a file does not read, is not a mapping, closes a cycle
    or names a parent that cannot be found (None when the chain is whole)."""
    chain: list[YamlSource] = []
    seen: list[str] = []
    cur: Path | None = path
    while cur is not None:
        src = read_yaml(cur)
        if src.text is not None:
            texts[src.path] = src.text
        if src.diagnostics:
            diags += src.diagnostics
            return chain, Merged(src, texts, Lineage(), diags)
        if not isinstance(src.data, dict):
            diags.append(
                Diagnostic(
                    "error",
                    "schema",
                    "a generation file is a mapping with keys generation, description, clock_domains, spec, blocks",
                    Span(src.path, 1, 1),
                )
            )
            return chain, Merged(src, texts, Lineage(), diags)
        chain.append(src)
        name = str(src.data.get("generation", cur.stem))
        if name in seen:
            cycle = " extends ".join(seen[seen.index(name) :] + [name])
            diags.append(
                Diagnostic(
                    "error",
                    "extends-cycle",
                    f"`extends` cycle: {cycle}",
                    chain[-2].span(("extends",)),
                    hint="a generation cannot extend itself, directly or through its parents",
                )
            )
            return chain, Merged(chain[0], texts, Lineage(), diags)
        seen.append(name)
        parent = src.data.get("extends")
        if parent is None:
            break
        if not isinstance(parent, str) or not IDENT_RE.match(parent):  # a name, never a path read as one
            diags.append(
                Diagnostic(
                    "error",
                    "schema",
                    f"`extends` is the name of the generation this one extends (e.g. `sohu`), not {parent!r}",
                    src.span(("extends",)),
                    hint="name a generation shipped or declared by a file of this folder; a path is not a name",
                )
            )
            return chain, Merged(chain[0], texts, Lineage(), diags)
        try:
            ppath = find_parent(parent, cur, shipped)
        except DuplicateParent as dup:
            diags.append(
                Diagnostic(
                    "error",
                    "duplicate-generation",
                    f"`extends: {parent}`: two files declare `generation: {parent}`: "
                    + " and ".join(str(q) for q in dup.paths),
                    src.span(("extends",)),
                    hint="keep one, or give the other its own name",
                )
            )
            return chain, Merged(chain[0], texts, Lineage(), diags)
        if ppath is None:
            diags.append(_unknown_parent(src, str(parent), cur, shipped))
            return chain, Merged(chain[0], texts, Lineage(), diags)
        cur = ppath
    return chain, None


def _unknown_parent(src: YamlSource, parent: str, cur: Path, shipped: Path) -> Diagnostic:
    """The error for an ``extends`` that names no generation file next to ``cur`` or shipped."""
    known = sorted({p.stem for p in list(cur.parent.glob("*.yaml")) + list(shipped.glob("*.yaml"))})
    tool = _tool_catalog(parent)
    if tool is not None:  # `extends: linux` was told to extend `mylinux`, the file's own name (a new user)
        return Diagnostic(
            "error",
            "unknown-parent",
            f"`extends: {parent}`: `{parent}` is a shipped tool catalog ({tool}), which a folder does not extend",
            src.span(("extends",)),
            hint=f"copy {tool}'s *.yaml and *.metrics files into this folder and extend the copy (its metrics come "
            "with it); the guide real-captures.md shows how",
        )
    return Diagnostic(
        "error",
        "unknown-parent",
        f"`extends: {parent}`: no generation file `{parent}.yaml` next to this file or shipped",
        src.span(("extends",)),
        hint=did_you_mean(parent, known) or f"known generations: {', '.join(known)}",
    )


def _tool_catalog(name: str) -> str | None:
    """The folder of the shipped tool catalog (``perfonto/catalogs/<tool>/``: linux, node, dcgm, ncu, rocprof)
    holding generation ``name``, or None."""
    from importlib import resources

    try:
        root = Path(str(resources.files("perfonto").joinpath("catalogs")))
    except (ModuleNotFoundError, TypeError):
        return None
    hits = sorted(root.glob(f"*/{name}.yaml")) if IDENT_RE.match(name) else []
    return str(hits[0].parent) if hits else None


def _merge_generation(src: YamlSource, data: dict, pos: dict, lineage: Lineage, diags: list[Diagnostic]) -> None:
    """Merge one generation of the chain onto `data` (its parents merged): its values, its removals and
    renames, and what they do to the lineage (first generations, aliases, ids)."""
    assert isinstance(src.data, dict), "_read_chain keeps the sources whose document is a mapping"
    gname = str(src.data.get("generation", Path(src.path).stem))
    lineage.chain.append(gname)
    child = {k: v for k, v in src.data.items() if k not in ("removed", "renamed")}
    before = signal_names(data)
    lineage.parent_spec = {
        str(k): str(v.get("unit", "")) for k, v in (data.get("spec") or {}).items() if isinstance(v, dict)
    }
    diags += scale_field_overrides(src, data)
    for k in NOT_INHERITED:
        data.pop(k, None)
    _merge(data, child, pos, src.positions, ())
    for key in ("removed", "renamed"):  # this file's entries, not the parent's (for errors located at them)
        for k in [k for k in pos if k[:1] == (key,)]:
            del pos[k]
        pos.update({k: v for k, v in src.positions.items() if k[:1] == (key,)})
    for removed in src.data.get("removed", []) or []:
        apply_removal(src, data, lineage, gname, removed, diags)
    for old, new in (src.data.get("renamed") or {}).items():
        apply_rename(src, data, pos, lineage, before, old, new, diags)
    for s in signal_names(data) - before:
        lineage.since.setdefault(s, gname)
        lineage.removed.pop(s, None)  # declared again after an ancestor removed it: a signal here
    _assign_ids(lineage, data, src, gname)
    data["removed"] = list(src.data.get("removed", []) or [])
    data["renamed"] = dict(src.data.get("renamed", {}) or {})


def scale_field_overrides(src: YamlSource, data: dict) -> list[Diagnostic]:
    """Errors for each signal ``src`` (a child generation) overrides with another ``unit`` while its parent
    (``data``, merged so far) reads the unit per sample from a ``scale_field`` that the child does not
    restate: the parent's field would still scale the child's plain unit, silently wrong by orders of
    magnitude (RAPL's 2^-ESU J). The error points at the child's ``unit`` (file:line:col)."""
    out: list[Diagnostic] = []
    assert isinstance(src.data, dict), "a generation document is a mapping"
    for b, blk in (src.data.get("blocks") or {}).items():
        sigs = blk.get("signals") if isinstance(blk, dict) else None
        for s, child in (sigs or {}).items() if isinstance(sigs, dict) else ():
            parent = ((data.get("blocks") or {}).get(b) or {}).get("signals", {}).get(s)
            if not (isinstance(child, dict) and isinstance(parent, dict) and parent.get("scale_field")):
                continue
            if "unit" in child and "scale_field" not in child and str(child["unit"]) != str(parent.get("unit")):
                field = parent["scale_field"]
                out.append(
                    Diagnostic(
                        "error",
                        "scale-field-override",
                        f"`{b}.{s}` changes its unit to `{child['unit']}` (the parent's: `{parent.get('unit')}`) "
                        f"but keeps the parent's `scale_field` ({field}), which scales every sample of the new unit",
                        src.span(("blocks", b, "signals", s, "unit")),
                        hint="restate `scale_field` for the new unit, or write `scale_field: null` for a plain unit",
                    )
                )
    return out


def _assign_ids(lineage: Lineage, data: dict, src: YamlSource, gname: str) -> None:
    """C header ids after generation ``gname`` merged in: renamed signals take their old name's id,
    explicit ``id:`` values written in this file win, every other signal without an id gets the next
    id no signal ever had (so removed signals' ids are never reused), in file order."""
    ids = lineage.ids
    for old, new in lineage.aliases.items():
        if old in ids and new not in ids:
            ids[new] = ids[old]
    taken = set(ids.values())
    names = [
        f"{b}.{s}"
        for b, block in (data.get("blocks") or {}).items()
        if isinstance(block, dict)
        for s in (block.get("signals") or {})
    ]
    for name, i in _written_ids(src).items():
        holder = next((n for n, j in ids.items() if j == i and n != name and n not in lineage.aliases), None)
        if holder is not None:
            lineage.id_errors.append(
                Diagnostic(
                    "error",
                    "signal-id",
                    f"signal `{name}` takes id {i}, which is `{holder}`'s",
                    src.span(("blocks", name.split(".")[0], "signals", name.split(".", 1)[1], "id")),
                    hint="an id is never given twice, nor reused after a removal; pick an unused one",
                )
            )
            continue
        ids[name] = i
        taken.add(i)
    nxt = 0
    for name in names:
        if name in ids:
            continue
        while nxt in taken:
            nxt += 1
        ids[name] = nxt
        taken.add(nxt)


def _written_ids(src: YamlSource) -> dict[str, int]:
    """Full signal name → the integer ``id:`` this file writes for it, in file order."""
    assert isinstance(src.data, dict), "_read_chain keeps the sources whose document is a mapping"
    own = {}
    for b, block in (src.data.get("blocks") or {}).items() if isinstance(src.data.get("blocks"), dict) else ():
        for s, sig in ((block or {}).get("signals") or {}).items() if isinstance(block, dict) else ():
            if isinstance(sig, dict) and isinstance(sig.get("id"), int) and not isinstance(sig.get("id"), bool):
                own[f"{b}.{s}"] = sig["id"]
    return own


def _shape_errors(src: YamlSource) -> list[Diagnostic]:
    """The shapes merging relies on (the schema checks the rest after merging)."""
    out = []
    assert isinstance(src.data, dict), "_read_chain keeps the sources whose document is a mapping"
    d = src.data
    want = {"removed": list, "renamed": dict, "blocks": dict, "spec": dict, "clock_domains": dict, "records": dict}
    for key, typ in want.items():
        if key in d and d[key] is not None and not isinstance(d[key], typ):
            out.append(
                Diagnostic(
                    "error",
                    "schema",
                    f"`{key}` must be a {'list' if typ is list else 'mapping'}, got {type(d[key]).__name__}",
                    src.span((key,)),
                    hint="see schemas/generation.schema.json",
                )
            )
    if isinstance(d.get("extends"), (dict, list)):
        out.append(Diagnostic("error", "schema", "`extends` names one generation", src.span(("extends",))))
    for b, block in (d.get("blocks") or {}).items() if isinstance(d.get("blocks"), dict) else ():
        if not isinstance(block, dict):
            out.append(Diagnostic("error", "schema", f"block `{b}` must be a mapping", src.span(("blocks", b))))
        elif "signals" in block and block["signals"] is not None and not isinstance(block["signals"], dict):
            out.append(
                Diagnostic(
                    "error", "schema", f"`blocks.{b}.signals` must be a mapping", src.span(("blocks", b, "signals"))
                )
            )
    for i, r in enumerate(d.get("removed") or [] if isinstance(d.get("removed"), list) else []):
        if not isinstance(r, str):
            out.append(Diagnostic("error", "schema", "`removed` lists full signal names", src.span(("removed", i))))
    if isinstance(d.get("renamed"), dict):
        olds, news = set(), set()
        for k, v in d["renamed"].items():
            if not isinstance(k, str) or not isinstance(v, str):
                out.append(
                    Diagnostic("error", "schema", "`renamed` maps old full names to new ones", src.span(("renamed", k)))
                )
                continue
            olds.add(k)
            news.add(v)
        out += duplicate_targets(src)
        for both in sorted(olds & news):
            out.append(
                Diagnostic(
                    "error",
                    "schema",
                    f"`{both}` is both renamed and a rename target",
                    src.span(("renamed", both)),
                    hint="rename in one direction only; a swap needs two generations",
                )
            )
    return out
