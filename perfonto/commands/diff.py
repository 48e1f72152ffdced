"""``perfonto diff OLD NEW [--catalog DIR]``: compatibility of two generations (exit 1 when a policy is broken)."""

from __future__ import annotations

import json

from . import HELP
from .common import load_generation_arg


def register(sub) -> None:
    d = sub.add_parser("diff", help=HELP["diff"])
    d.add_argument("old", help="generation name (e.g. sohu) or path to a generation YAML file")
    d.add_argument("new", help="generation name (e.g. caelius) or path to a generation YAML file")
    d.add_argument(
        "--catalog",
        metavar="DIR",
        default=None,
        help="catalog folder: a generation name is looked up among its *.yaml files first, then among the "
        "shipped generations (default: the shipped ones only)",
    )
    d.add_argument("--json", action="store_true", help="print one JSON object")
    d.set_defaults(func=cmd_diff)


def cmd_diff(args) -> int:
    from perfonto.metrics.diff import diff_generations

    gens = [load_generation_arg(which, args.catalog)[0] for which in (args.old, args.new)]
    doc = diff_generations(*gens, graphs=tuple(_folder_graph(args.catalog, g) for g in gens))
    if args.json:
        print(json.dumps(doc, indent=2, default=str))
    else:
        s = doc["signals"]
        print(f"{doc['old']} -> {doc['new']}")
        print(f"signals added ({len(s['added'])}): {', '.join(s['added']) or '-'}")
        print(f"signals removed ({len(s['removed'])}): {', '.join(s['removed']) or '-'}")
        print(
            f"signals renamed ({len(s['renamed'])}): "
            + (", ".join(f"{r['from']} -> {r['to']}" for r in s["renamed"]) or "-")
        )
        _section("signals changed", s["changed"], _change_line)
        _section(
            "spec constants changed", doc["spec"], lambda c: f"{c['constant']}: {c['old'] or '-'} -> {c['new'] or '-'}"
        )
        m = doc["metrics"]
        print(f"metrics added ({len(m['added'])}): {', '.join(m['added']) or '-'}")
        print(f"metrics removed ({len(m['removed'])}): {', '.join(m['removed']) or '-'}")
        _section("metrics that become unavailable", m["became_unavailable"], lambda x: f"{x['metric']}: {x['reason']}")
        _section("metrics whose meaning changes", m["changed"], lambda x: f"{x['metric']}: {'; '.join(x['why'])}")
        for e in doc["errors"]:
            print(f"error: {e}")
        print(
            f"compatible: {'yes' if doc['compatible'] else 'no'} "
            f"({len(doc['errors'])} policy error(s): stable signals may change only through deprecation)"
        )
    return 1 if doc["errors"] else 0


def _folder_graph(catalog: str | None, gen):
    """The compiled metrics of ``gen`` when the ``--catalog`` folder declares it (its own metric files with the
    library, as every command compiles it: a new user's two metrics were missing from the diff); else None."""
    if catalog is None:
        return None
    from pathlib import Path

    from perfonto.metrics.catalog import load_catalog

    src = Path(str(getattr(gen, "source_file", "") or ""))
    try:
        if not src.is_file() or src.parent.resolve() != Path(catalog).resolve():
            return None
    except OSError:
        return None
    cat = load_catalog(catalog, gen.name)
    return cat.graph if cat.generation is not None else None


def _change_line(c: dict) -> str:
    """``signal: field old -> new``, then what the change does and whether the policy allows it (a sentinel
    list as ``[65535]``, an empty one or no value as ``none``)."""
    old, new = ("none" if v is None or v == [] else v for v in (c["old"], c["new"]))
    why = "; ".join(x for x in (c.get("effect"), "policy error" if c.get("policy") == "error" else None) if x)
    return f"{c['signal']}: {c['field']} {old} -> {new}" + (f" ({why})" if why else "")


def _section(title: str, entries: list, line) -> None:
    """``title (n):``, then ``line(entry)`` indented for each entry."""
    print(f"{title} ({len(entries)}):")
    for e in entries:
        print(f"  {line(e)}")
