"""``perfonto diff OLD NEW``: compatibility of two generations (exit 1 when a policy is broken)."""

from __future__ import annotations

import json

from . import HELP
from .common import load_generation_arg


def register(sub) -> None:
    d = sub.add_parser("diff", help=HELP["diff"])
    d.add_argument("old", help="generation name (e.g. sohu) or path to a generation YAML file")
    d.add_argument("new", help="generation name (e.g. caelius) or path to a generation YAML file")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    d.set_defaults(func=cmd_diff)


def cmd_diff(args) -> int:
    from perfonto.metrics.diff import diff_generations

    gens = [load_generation_arg(which)[0] for which in (args.old, args.new)]
    doc = diff_generations(*gens)
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
        print(f"signals changed ({len(s['changed'])}):")
        for c in s["changed"]:
            print(f"  {c['signal']}: {c['field']} {c['old']} -> {c['new']}")
        print(f"spec constants changed ({len(doc['spec'])}):")
        for c in doc["spec"]:
            print(f"  {c['constant']}: {c['old'] or '-'} -> {c['new'] or '-'}")
        m = doc["metrics"]
        print(f"metrics that become unavailable ({len(m['became_unavailable'])}):")
        for x in m["became_unavailable"]:
            print(f"  {x['metric']}: {x['reason']}")
        print(f"metrics whose meaning changes ({len(m['changed'])}):")
        for x in m["changed"]:
            print(f"  {x['metric']}: {'; '.join(x['why'])}")
        for e in doc["errors"]:
            print(f"error: {e}")
        print(
            f"compatible: {'yes' if doc['compatible'] else 'no'} "
            f"({len(doc['errors'])} policy error(s): stable signals may change only through deprecation)"
        )
    return 1 if doc["errors"] else 0
