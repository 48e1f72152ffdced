"""Load generation YAML files into resolved generations, with errors that name file:line:col.

Entry points:
- ``load_generation(name_or_path)`` — a shipped generation by name (``"sohu"``) or a YAML path.
- ``load_generation_files(paths, name)`` — pick generation ``name`` among several files (``perfonto
  check --catalog DIR``); ``name=None``: the folder's own (``folder_generations``), an error naming
  the candidates when it holds several.
Both return ``(Generation | None, diagnostics)`` and never raise on bad input.
"""

from __future__ import annotations

from importlib import resources
import re
from pathlib import Path

from pydantic import ValidationError

from .diagnostics import Diagnostic, Span, did_you_mean, with_source
from .generation import Generation, resolve
from .model import IDENT_RE, GenerationFile
from .extends import load_chain
from .override_sites import at_override
from .yaml_source import YamlSource, read_yaml


def catalog_dir() -> Path:
    """Folder of the shipped generation files (package data)."""
    return Path(str(resources.files("perfonto.ontology").joinpath("catalog")))


def shipped_generations() -> list[str]:
    return sorted(p.stem for p in catalog_dir().glob("*.yaml"))


def _validate(src: YamlSource) -> GenerationFile | None:
    if not isinstance(src.data, dict):
        if src.data is not None:
            src.diagnostics.append(
                Diagnostic(
                    "error",
                    "schema",
                    "a generation file is a mapping with keys generation, description, clock_domains, spec, blocks",
                    Span(src.path, 1, 1),
                )
            )
        return None
    return validate_model(src, GenerationFile)


def validate_model(src: YamlSource, model):
    """Validate ``src.data`` against a pydantic ``model``; every error becomes a located diagnostic in
    ``src.diagnostics`` (unknown fields with a "did you mean"). Returns the model instance or None."""
    try:
        return model.model_validate(src.data)
    except ValidationError as exc:
        seen_union: dict[tuple, int] = {}
        for err in exc.errors():
            loc = tuple(err["loc"])
            # a value that fits no member of a union gives one error per member: report one, naming all
            member = next(
                (
                    i
                    for i, part in enumerate(loc)
                    if isinstance(part, str)
                    and (
                        part in ("int", "str", "float", "constrained-int") or part.startswith(("literal[", "function-"))
                    )
                ),
                None,
            )
            if member is not None:
                field_loc = loc[:member]
                if field_loc in seen_union:
                    prev = src.diagnostics[seen_union[field_loc]]
                    src.diagnostics[seen_union[field_loc]] = Diagnostic(
                        prev.severity,
                        prev.code,
                        prev.message + f"; or {err['msg'][0].lower()}{err['msg'][1:]}",
                        prev.span,
                        prev.hint,
                    )
                    continue
                seen_union[field_loc] = len(src.diagnostics)
                loc = field_loc
            if err["type"] == "extra_forbidden":
                key = loc[-1]
                parent = _parent_model(loc[:-1], model)
                hint = did_you_mean(str(key), parent.model_fields) if parent else ""
                allowed = ", ".join(parent.model_fields) if parent else ""
                src.diagnostics.append(
                    Diagnostic(
                        "error",
                        "unknown-field",
                        f"unknown field `{key}`",
                        src.span(loc + ("<key>",)),
                        hint=hint or (f"allowed fields: {allowed}" if allowed else ""),
                    )
                )
            elif err["type"] == "missing":
                src.diagnostics.append(
                    Diagnostic(
                        "error",
                        "missing-field",
                        f"missing field `{loc[-1]}`",
                        src.span(loc[:-1]),
                        hint=f"add `{loc[-1]}:`",
                    )
                )
            else:
                where = ".".join(str(p) for p in loc)
                src.diagnostics.append(
                    Diagnostic("error", "schema", f"`{where}`: {err['msg']} (got {err.get('input')!r})", src.span(loc))
                )
        return None


def _parent_model(loc: tuple, root):
    """Pydantic model class that holds the field at ``loc`` (skipping dict keys and list indices)."""
    cur = root
    i = 0
    while i < len(loc):
        f = cur.model_fields.get(loc[i])
        if f is None:
            return None
        ann = f.annotation
        import typing

        origin = typing.get_origin(ann)
        args = typing.get_args(ann)
        if origin is list:
            i += 2  # field name, then the list index
            cur = args[0]
            if not (isinstance(cur, type) and hasattr(cur, "model_fields")):
                return None
            continue
        if origin is dict:
            inner = args[1]
            i += 2  # field name, then the dict key
            cur = typing.get_args(inner)[0] if typing.get_origin(inner) is typing.Annotated else inner
        else:
            if typing.get_origin(ann) in (typing.Union, __import__("types").UnionType):
                ann = next(a for a in args if a is not type(None))
            cur = ann
            i += 1
        if not (isinstance(cur, type) and hasattr(cur, "model_fields")):
            return None
    return cur


def _load_path(path: Path) -> tuple[Generation | None, list[Diagnostic]]:
    merged = load_chain(path, catalog_dir())
    src = merged.source
    diags = list(merged.diagnostics)
    gen = None
    if not diags:
        gf = _validate(src)
        diags += src.diagnostics
        if gf is not None:
            gen, more = resolve(gf, src, merged.lineage)
            diags += more
        diags = at_override(diags, src)  # an inherited value the child's override made wrong: at the child's line
    return gen, [with_source(d, merged.texts.get(d.span.file)) for d in diags]


def load_generation(name_or_path: str | Path) -> tuple[Generation | None, list[Diagnostic]]:
    """Load a shipped generation by name or a generation YAML file by path (with its ``extends`` chain)."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return _load_path(p)
    shipped = catalog_dir() / f"{name_or_path}.yaml"
    if not shipped.exists():
        hint = (
            did_you_mean(str(name_or_path), shipped_generations())
            or f"shipped generations: {', '.join(shipped_generations())}"
        )
        return None, [
            Diagnostic(
                "error",
                "unknown-generation",
                f"no generation named `{name_or_path}`",
                Span(str(name_or_path)),
                hint=hint,
            )
        ]
    return _load_path(shipped)


def load_generation_files(paths: list[Path], name: str | None) -> tuple[Generation | None, list[Diagnostic]]:
    """Among the YAML files ``paths``, load the one declaring ``generation: name`` (parents are looked
    up next to it first, then among the shipped generations).

    ``name=None``: the folder's generation — the one generation no other file extends
    (``folder_generations``). Two or more such (siblings that both extend ``sohu``) are an
    ``unknown-generation`` error naming each and ``--generation`` (``unchosen``): loading ``sohu``
    instead reported that no file declares `sohu`, a name the user never gave."""
    if name is None:
        name, diag = _folder_choice(paths)
        if diag is not None:
            return None, [diag]
    diags: list[Diagnostic] = []
    names = []
    found: list[tuple[Path, YamlSource]] = []  # the files declaring `name`: one, or the duplicate is an error
    for p in sorted(paths):
        src = read_yaml(p)
        if src.diagnostics:
            diags += [with_source(d, src.text) for d in src.diagnostics]
            continue
        gname = src.data.get("generation") if isinstance(src.data, dict) else None
        if not isinstance(gname, str):
            diags.append(
                Diagnostic(
                    "error",
                    "schema",
                    "`generation` must be the generation's name (a string)",
                    src.span(("generation",)) if isinstance(src.data, dict) else Span(str(p), 1, 1),
                )
            )
            continue
        names.append(gname)
        if gname != name and not IDENT_RE.match(gname):  # else the did-you-mean below would hide the real error
            diags.append(
                with_source(
                    Diagnostic(
                        "error",
                        "schema",
                        f"`generation`: `{gname}` is not a valid generation name (it must match {IDENT_RE.pattern})",
                        src.span(("generation",)),
                        hint=f"e.g. `{re.sub('[^a-z0-9_]', '_', gname.lower())}`",
                    ),
                    src.text,
                )
            )
        if gname == name:
            found.append((Path(p), src))
    if len(found) > 1:
        where = " and ".join(f"{q}:{s.span(('generation',)).line}" for q, s in found)
        return None, diags + [
            Diagnostic(
                "error",
                "duplicate-generation",
                f"two files declare `generation: {name}`: {where}",
                found[1][1].span(("generation",)),
                hint="keep one, or give the other its own name (a generation that extends it says `extends:`)",
            )
        ]
    if found:
        gen, more = _load_path(found[0][0])
        return gen, diags + more
    if diags and not any(n == name for n in names):
        return None, diags  # the files that failed to read may be the one declaring it: their errors say why
    diags.append(
        Diagnostic(
            "error",
            "unknown-generation",
            f"no file declares `generation: {name}`",
            Span(str(paths[0].parent) if paths else "."),
            hint=did_you_mean(name, [n for n in names if n])
            or (
                f"generations found: {', '.join(str(n) for n in names)}; pick one with --generation NAME"
                if names
                else "generations found: none"
            ),
        )
    )
    return None, diags


#: YAML files of a catalog folder that declare no generation: test vectors and finding rules.
SIDE_YAML = (".vectors.yaml", ".vectors.yml", ".findings.yaml", ".findings.yml")

#: The start of the message of the error for a folder of several generations and none named (``unchosen``).
UNCHOSEN = "the catalog folder holds several generations and none was named"


def folder_yamls(folder: str | Path) -> list[Path]:
    """The ontology YAML files of a catalog folder (``*.yaml``, ``*.yml``), sorted; side files (test
    vectors, finding rules: ``SIDE_YAML``) left out."""
    d = Path(folder)
    return sorted(p for p in [*d.glob("*.yaml"), *d.glob("*.yml")] if not p.name.endswith(SIDE_YAML))


def folder_generations(paths: list[Path]) -> list[tuple[str, Path]]:
    """The generations the YAML files ``paths`` of a catalog folder declare that no other of them extends
    — the candidates for the folder's generation when none is named — each with its file, in file order.
    Side files (test vectors, finding rules) and files that do not read are left out (loading reports
    them)."""
    return _leaves(*_declared(paths))


def _leaves(declared: list[tuple[str, Path]], parents: set[str]) -> list[tuple[str, Path]]:
    leaves: dict[str, Path] = {}
    for n, p in declared:
        if n not in parents:
            leaves.setdefault(n, p)
    return list(leaves.items())


def _declared(paths: list[Path]) -> tuple[list[tuple[str, Path]], set[str]]:
    """Each generation the files ``paths`` declare, with its file, in file order; and the generations
    they extend."""
    declared: list[tuple[str, Path]] = []
    parents: set[str] = set()
    for p in sorted(Path(q) for q in paths):
        if p.name.endswith(SIDE_YAML):
            continue
        src = read_yaml(p)  # guarded against alias bombs, deep nesting and bad bytes
        doc = src.data if not src.diagnostics else None
        if isinstance(doc, dict) and isinstance(doc.get("generation"), str):
            declared.append((doc["generation"], p))
            if isinstance(doc.get("extends"), str):
                parents.add(doc["extends"])
    return declared, parents


def _folder_choice(paths: list[Path]) -> tuple[str, Diagnostic | None]:
    """The generation to load among ``paths`` when none is named: the folder's one leaf; with none (the
    files extend each other in a cycle) the first declared, whose loading reports the cycle; with no
    declared generation ``sohu`` (loading reports why the files declare none); with several, an error."""
    declared, parents = _declared(paths)
    leaves = _leaves(declared, parents)
    if len(leaves) == 1:
        return leaves[0][0], None
    if not leaves:
        return (declared[0][0] if declared else "sohu"), None
    folder = Path(sorted(Path(q) for q in paths)[0]).parent
    listed = ", ".join(f"`{n}` ({p.name})" for n, p in leaves[:-1]) + f" and `{leaves[-1][0]}` ({leaves[-1][1].name})"
    return "", Diagnostic(
        "error",
        "unknown-generation",
        f"{UNCHOSEN}: {listed}, which no other file of it extends",
        Span(str(folder)),
        hint=f"generations found: {', '.join(n for n, _ in leaves)}; pick one with --generation NAME "
        f"(e.g. --generation {leaves[0][0]})",
    )


def unchosen(diagnostics) -> Diagnostic | None:
    """The error of ``load_generation_files(paths, None)`` for a folder of several generations (the
    caller names none), among ``diagnostics``; None when there is none."""
    return next((d for d in diagnostics if d.code == "unknown-generation" and d.message.startswith(UNCHOSEN)), None)
