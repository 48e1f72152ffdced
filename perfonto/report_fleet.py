"""The fleet section of the terminal report: metrics per host, rack and fleet, their spread, and the
nodes that stand out against their peers."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from perfonto.analysis.capture import Report

from .report_format import plain, value_text

__all__ = ["render_fleet"]


def render_fleet(result: Report, console: Console, max_rows: int = 12) -> None:
    """The fleet section: the report's fleet metrics (``report_layout``) per pod, rack and host (ratios
    of totals; the largest levels cut to ``max_rows`` rows), their spread across chips, the chips that
    stand out, and the racks and pods that stand out as a group."""
    from .report import report_layout  # the text report's layout (read at call time: one definition)

    fleet = result.fleet
    graph = result.evaluated
    shown = report_layout(graph, result.evaluation).fleet  # the catalog's `report: fleet`, or its headline's first
    names = [n for n in shown if n in graph.metrics and n in fleet.values.get("fleet", {})]
    for level in ("fleet", "pod", "rack", "host"):
        if level in fleet.nodes:
            console.print(_level_table(fleet, graph, names, level, max_rows))
    console.print(_spread_table(fleet, graph, names))
    _nodes_out(fleet, graph, names, console)


def _level_table(fleet, graph, names: list[str], level: str, max_rows: int) -> Table:
    """One level's fleet table: a row per node (the first ``max_rows``), a column per metric of ``names``;
    a column whose node value is the extreme of its chips' (``metrics.across_chips.chip_extreme``: a
    ``rollup max|min``, or a gauge combined by ``max``) says so, not read as a ratio of totals."""
    from perfonto.metrics.across_chips import chip_extreme, chip_mean

    nodes = fleet.nodes[level]
    extreme = {n: chip_extreme(graph, n) or ("mean" if chip_mean(graph, n) else None) for n in names}
    said = "; (max) and (min) columns: the extreme over those chips" if {"max", "min"} & set(extreme.values()) else ""
    said += "; (mean) columns: the mean over those chips, not their sum" if "mean" in extreme.values() else ""
    t = Table(
        title=f"Fleet — per {level} ({len(nodes)}; ratios of totals over each node's chips{said})",
        title_justify="left",
    )
    t.add_column(level, overflow="fold")  # a long name wraps whole: names cut alike would read as one node
    places = _host_racks(fleet) if level == "host" else {}
    where = [k for k in ("rack", "pod") if any(p[k] for p in places.values())]
    for k in where:
        t.add_column(k, overflow="fold")
    t.add_column("chips", justify="right")
    for n in names:
        t.add_column(n + (f" ({extreme[n]})" if extreme[n] else ""), justify="right", overflow="fold")
    for i, node in enumerate(nodes[:max_rows]):
        t.add_row(
            plain(node),
            *[plain(places[node][k] or "—") for k in where],
            str(int(fleet.chips[level][i])),
            *[value_text(fleet.values[level][n][i], graph.metrics[n].unit_text) for n in names],
        )
    if len(nodes) > max_rows:
        t.add_row(
            f"… {len(nodes) - max_rows} more in report.json (fleet.levels.{level})",
            *["" for _ in where],
            "",
            *["" for _ in names],
        )
    return t


def _host_racks(fleet) -> dict[str, dict[str, str | None]]:
    """Each host's rack and pod, for the host table (``analysis.fleet_words.host_places``)."""
    from perfonto.analysis.fleet_words import host_places

    return host_places((h, rack, pod) for h, _, rack, pod in fleet.place)


def _spread_table(fleet, graph, names: list[str]) -> Table:
    """The spread of ``names`` across chips (or hosts, for leader-counted metrics) and the chips that
    stand out on either side (the first three)."""
    from perfonto.analysis.fleet_words import over_hosts, past, who

    t = Table(
        title="Spread across chips, or hosts where marked (one stands out at a modified z-score past 3.5 and "
        "≥ 1 % from p50)",
        title_justify="left",
    )
    hosts = len(fleet.nodes.get("host", []))
    longest = max(
        [
            len(n) + (len(over_hosts(fleet.spread[n], hosts)) if fleet.spread.get(n, {}).get("over") else 0)
            for n in names
        ]
        or [6]
    )
    t.add_column("metric", no_wrap=True, min_width=longest)  # a metric's name whole, on one line
    for col in (
        "p50",
        "p99",
        "max",
        "past threshold",
        "chips that stand out high (host/chip, rack, vs p50)",
        "low",
    ):
        t.add_column(col, overflow="fold")
    hosts = len(fleet.nodes.get("host", []))
    for n in names:
        sp, out = fleet.spread.get(n), fleet.outliers.get(n, {})
        if not sp or sp.get("p50") is None:
            continue
        unit = graph.metrics[n].unit_text
        thr = sp.get("threshold")
        side = {}
        for k in ("high", "low"):
            shown = out.get(k, [])[:3]
            text = ", ".join(who(o) + " " + _versus(graph, n, o["value"], sp["p50"], o.get("relative")) for o in shown)
            more = (sp.get("stand_out") or {}).get(k, len(shown)) - len(shown)
            side[k] = (text + (f", … {more} more" if more > 0 else "")) or "—"
        t.add_row(
            n + (over_hosts(sp, hosts) if sp.get("over") == "hosts" else ""),
            value_text(sp["p50"], unit),
            value_text(sp["p99"], unit),
            value_text(sp["max"], unit),
            past(thr),
            plain(side["high"]),
            plain(side["low"]),
        )
    return t


def _versus(graph, name: str, value: float, reference: float, relative: float | None) -> str:
    """How far ``value`` is from ``reference``, as the reports say it (``analysis.fleet_words.versus``: degC
    differences in degrees, the others a signed percent)."""
    from perfonto.analysis.fleet_words import versus
    from perfonto.ontology.units import is_interval_scale

    m = graph.metrics[name]
    return versus(value, reference, relative, m.unit_text, is_interval_scale(m.unit))


def _nodes_out(fleet, graph, names: list[str], console: Console, most: int = 8) -> None:
    """The racks and pods whose chips stand out as a group (``analysis.fleet_nodes``), for the fleet
    tables' metrics first, then the others; at most ``most`` lines (``report.json`` has them all)."""
    from perfonto.analysis.fleet_words import members

    rows = [
        (m, level, o)
        for m in [*names, *[n for n in fleet.nodes_out if n not in names]]
        for level, found in fleet.nodes_out.get(m, {}).items()
        for o in found
    ]
    if not rows:
        return
    console.print(
        "Racks and pods that stand out (their chips' median, or hosts' where marked, against the typical node's, "
        "or the other one's; "
        "the chip spread above cannot name a node that holds much of the fleet):"
    )
    for m, level, o in rows[:most]:
        unit = graph.metrics[m].unit_text
        vs = _versus(graph, m, o["median"], o["reference"], o.get("relative"))
        console.print(
            Text.assemble(
                f"  {level} ",
                plain(o["node"] if len(o["node"]) <= 80 else o["node"][:79] + "…"),  # report.json has it whole
                f" ({members(o)}): {m} {value_text(o['median'], unit)} "
                f"against {value_text(o['reference'], unit)} ({vs})",
            )
        )
    if len(rows) > most:
        console.print(f"  … {len(rows) - most} more in report.json (fleet.nodes_out)")
