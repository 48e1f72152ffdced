"""Hand-written guides shipped with perfonto and included in the docs site (``perfonto docs``):
the Python API, the collector format, real tools' captures (perf, Prometheus, DCGM), and the list of
diagnostic codes (generated from ``ontology.codes``)."""

from __future__ import annotations

from importlib import resources

GUIDES = ("api.md", "collector-format.md", "real-captures.md")


def guide_text(name: str) -> str:
    """The Markdown text of guide ``name`` (one of ``GUIDES``)."""
    return resources.files("perfonto.guides").joinpath(name).read_text(encoding="utf-8")


def diagnostics_page() -> str:
    """Every diagnostic code with its meaning, as a Markdown table."""
    from perfonto.ontology.codes import CODES

    rows = [
        "# Diagnostic codes",
        "",
        "Every problem `perfonto check` (and every other command) reports carries one of these codes, "
        "with file:line:col, the source line and a hint.",
        "",
        "| code | meaning |",
        "|---|---|",
    ]
    rows += [f"| `{code}` | {meaning.replace('|', '&#124;')} |" for code, meaning in sorted(CODES.items())]
    return "\n".join(rows) + "\n"


def guide_pages() -> dict[str, str]:
    """{relative path: Markdown} of the guides for the docs site."""
    pages = {f"guides/{name}": guide_text(name) for name in GUIDES}
    pages["guides/diagnostics.md"] = diagnostics_page()
    return pages
