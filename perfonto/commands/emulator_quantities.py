"""``perfonto emulator-quantities [--generation G] [--format text|markdown] [--json]``: the emulator's
named quantities — what a signal's ``emulator:`` binding may name — with kind, unit and meaning
(``emulator/data/quantities.yaml``), and which signals of the generation read each one.

Also checks the generation's bindings against them (``emulator.quantities.check_bindings``): every
problem is a located diagnostic on stderr and the exit code is 1. Exit 2 for an unknown generation.
"""

from __future__ import annotations

import json

from . import HELP
from .common import load_generation_arg, stderr, stdout


def register(sub) -> None:
    p = sub.add_parser("emulator-quantities", help=HELP["emulator-quantities"])
    p.add_argument(
        "--generation", default="sohu", help="generation whose bindings are shown and checked (default: sohu)"
    )
    p.add_argument(
        "--format", default="text", choices=["text", "markdown"], help="a table on the terminal, or a Markdown page"
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"quantities": [...], "generation", "unbound", "diagnostics"} and nothing else',
    )
    p.set_defaults(func=cmd_emulator_quantities)


def bound_by(gen) -> dict[str, list[str]]:
    """Quantity → the signals of ``gen`` whose binding reads it."""
    out: dict[str, list[str]] = {}
    for name, sig in gen.signals.items():
        if sig.emulator is not None:
            for q in sig.emulator.quantities:
                out.setdefault(q, []).append(name)
    return out


def markdown(quantities, users: dict[str, list[str]], generation: str) -> str:
    """The quantity list as a Markdown page (the docs' copy of ``data/quantities.yaml``)."""

    def esc(s: str) -> str:
        return s.replace("|", "\\|")

    lines = [
        "# Emulator quantities",
        "",
        "What a signal's `emulator:` binding may name (`emulator/data/quantities.yaml`). `amount`s grow during the run "
        "and feed `linear` bindings of counters; `impulse`s are whole counts added when a step ends (`impulse` "
        "bindings); `level`s are held during each step (`gauge` bindings). Amounts are per chip; seconds convert to "
        "cycles of the signal's clock domain.",
        "",
        f"| quantity | kind | unit | meaning | signals of `{generation}` |",
        "|---|---|---|---|---|",
    ]
    for q in quantities.values():
        flags = (" Leader chip only." if q.leader_only else "") + (
            " Per link (a throttled link reads its own)." if q.per_link else ""
        )
        lines.append(
            f"| `{q.name}` | {q.kind} | {esc(q.unit)} | {esc(q.meaning)}{flags} | "
            f"{', '.join(f'`{s}`' for s in users.get(q.name, [])) or '—'} |"
        )
    return "\n".join(lines) + "\n"


def cmd_emulator_quantities(args) -> int:
    from perfonto.emulator.quantities import check_bindings, registry

    gen, _ = load_generation_arg(args.generation)
    quantities = registry()
    users = bound_by(gen)
    diags = check_bindings(gen)
    unbound = [n for n, s in gen.signals.items() if s.emulator is None]
    err = stderr()
    for d in diags:
        err.print(d.render(), markup=False)
    if args.json:
        print(
            json.dumps(
                {
                    "ok": not diags,
                    "generation": gen.name,
                    "quantities": [{**q.to_json(), "signals": users.get(n, [])} for n, q in quantities.items()],
                    "unbound": unbound,
                    "diagnostics": [d.to_json() for d in diags],
                },
                indent=2,
            )
        )
    elif args.format == "markdown":
        print(markdown(quantities, users, gen.name), end="")
    else:
        from rich.table import Table

        t = Table(title=f"Emulator quantities (signals of {gen.name} that read them)", title_justify="left")
        for col in ("quantity", "kind", "unit", "meaning", "signals"):
            t.add_column(col, overflow="fold")
        for n, q in quantities.items():
            t.add_row(n, q.kind, q.unit, q.meaning, ", ".join(users.get(n, [])) or "—")
        out = stdout()
        out.print(t)
        if unbound:
            out.print(
                f"signals of {gen.name} without a binding (absent from emulated dumps): {', '.join(unbound)}",
                markup=False,
            )
    if diags:
        err.print(f"error: {len(diags)} binding error(s) in generation `{gen.name}`", markup=False)
        return 1
    return 0
