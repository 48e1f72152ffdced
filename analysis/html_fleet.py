"""The fleet section of the HTML report: what the terminal report's fleet tables say (``perfonto.report_fleet.
render_fleet``), from ``report.json``'s ``fleet`` (``analysis.report_json.fleet_json``) — the report's fleet
metrics per pod, rack and host (ratios of totals over each node's chips, or the extreme over them where
marked), their spread across chips with the chips that stand out, and the racks and pods that stand out
as a group (``analysis.fleet_nodes``). A page shows more rows than a terminal (``MAX_ROWS`` a level);
``report.json`` holds them all."""

from __future__ import annotations

from .fleet_words import host_places, members, over_hosts, past, versus, who
from .html_report import _cell, _table, e, fmt

MAX_ROWS = 100  # nodes a level's table shows; the rest are counted
MAX_SIDE = 5  # chips named on each side of a metric's spread
LEVELS = ("fleet", "pod", "rack", "host")


def fleet_section(r: dict, names: list[str]) -> str:
    """``<section id="fleet">`` of report.json ``r`` for the metrics ``names`` (the report model's ``fleet``);
    empty when the report has no fleet section (a ``perfonto run``).

    Raises:
        KeyError, TypeError, ValueError, AttributeError: the fleet section is not as ``fleet_json`` writes it
            (a hand-edited report.json); the exception's ``section`` is ``fleet``.
    """
    fleet = r.get("fleet")
    if not fleet:
        return ""
    try:
        return _fleet_section(r, fleet, names)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        exc.section = "fleet"  # type: ignore[attr-defined]  # the command names it
        raise


def _fleet_section(r: dict, fleet: dict, names: list[str]) -> str:
    units = {n: m.get("unit", "") for n, m in (r.get("metrics") or {}).items()}  # every metric: nodes_out has others
    units |= {n: units.get(n, "") for n in names}
    levels = fleet.get("levels") or {}
    shown = [n for n in names if any(n in (row.get("metrics") or {}) for rows in levels.values() for row in rows)]
    out = ['<section id="fleet"><h2>Fleet</h2>']
    places = host_places((c.get("host"), c.get("rack"), c.get("pod")) for c in fleet.get("chips") or [])
    for level in LEVELS:
        if level in levels:
            where = places if level == "host" else {}
            marks = {n: "mean" for n in fleet.get("mean") or []} | (fleet.get("extreme") or {})
            out.append(_level(level, levels[level], shown, units, marks, where))
    out.append(_spread(fleet, shown, units))
    out.append(_nodes_out(fleet, shown, units))
    return "".join(out) + "</section>"


def _level(level: str, rows: list[dict], names: list[str], units: dict, extreme: dict, places: dict) -> str:
    """One level's table: a row per node (the first ``MAX_ROWS``; for hosts, their rack and pod when the
    topology gives them), a column per metric; a column whose node value is the extreme of its chips'
    says so in its header."""
    marked = any(extreme.get(n) in ("max", "min") for n in names)
    where = [k for k in ("rack", "pod") if any(p.get(k) for p in places.values())]
    head = [level, *where, "chips"] + [n + (f" ({extreme[n]})" if extreme.get(n) else "") for n in names]
    body = []
    for row in rows[:MAX_ROWS]:
        cells = "".join(_cell(row["metrics"].get(n), fmt(row["metrics"].get(n), units[n]), "metric", n) for n in names)
        at = "".join(f"<td>{e(places.get(str(row['node']), {}).get(k) or '—')}</td>" for k in where)
        body.append(
            f'<tr data-{e(level)}="{e(row["node"])}"><td class="node">{e(row["node"])}</td>{at}'
            f'<td class="num">{e(row["chips"])}</td>{cells}</tr>'
        )
    if len(rows) > MAX_ROWS:
        body.append(f'<tr><td colspan="{len(head)}">… {len(rows) - MAX_ROWS} more in report.json</td></tr>')
    said = "; (max) and (min) columns: the extreme over those chips" if marked else ""
    said += "; (mean) columns: the mean over those chips, not their sum" if "mean" in extreme.values() else ""
    return (
        f'<h3 id="fleet-{e(level)}">Per {e(level)} ({len(rows)})</h3><p class="dim">Ratios of totals over each '
        f"node's chips{said}.</p>" + _wide(_table(head, body, f"fleet-{level}"))
    )


def _spread(fleet: dict, names: list[str], units: dict) -> str:
    """The spread of each metric across chips (or hosts, for leader-counted metrics) and the chips that stand
    out on either side."""
    spread, outliers = fleet.get("spread") or {}, fleet.get("outliers") or {}
    hosts = len((fleet.get("levels") or {}).get("host") or [])
    interval = _interval_scale(fleet, units)
    body = []
    for n in names:
        sp = spread.get(n) or {}
        if sp.get("p50") is None:
            continue
        thr = sp.get("threshold")
        sides = []
        for k in ("high", "low"):
            found = (outliers.get(n) or {}).get(k, [])
            named = [
                who(o) + " " + versus(o["value"], sp["p50"], o.get("relative"), units[n], n in interval)
                for o in found[:MAX_SIDE]
            ]
            more = (sp.get("stand_out") or {}).get(k, len(found)) - len(named)
            sides.append(e(", ".join(named) + (f", … {more} more" if more > 0 else "")) or "—")
        over = over_hosts(sp, hosts) if sp.get("over") == "hosts" else ""
        body.append(
            f'<tr data-spread="{e(n)}"><td><code>{e(n)}</code>{e(over)}</td>'
            + "".join(_cell(sp.get(q), fmt(sp.get(q), units[n]), q, n) for q in ("p50", "p99", "max"))
            + f"<td>{e(past(thr))}</td>"
            + f"<td>{sides[0]}</td><td>{sides[1]}</td></tr>"
        )
    if not body:
        return ""
    return (
        '<h3 id="fleet-spread">Spread across chips</h3><p class="dim">Across chips, or hosts where marked; a chip '
        "stands out at a modified z-score past 3.5 and ≥ 1 % from p50.</p>"
        + _wide(
            _table(
                ["metric", "p50", "p99", "max", "past threshold", "stand out high (host/chip, rack, vs p50)", "low"],
                body,
                "fleet-spread",
            )
        )
    )


def _nodes_out(fleet: dict, names: list[str], units: dict) -> str:
    """The racks and pods whose chips stand out as a group, the fleet metrics first, then the others."""
    found = fleet.get("nodes_out") or {}
    interval = _interval_scale(fleet, units)
    items = []
    for m in [*names, *[n for n in found if n not in names]]:
        for level, nodes in (found.get(m) or {}).items():
            for o in nodes:
                unit = units.get(m, "")
                vs = versus(o["median"], o["reference"], o.get("relative"), unit, m in interval)
                items.append(
                    f'<li data-node="{e(o["node"])}">{e(level)} <code>{e(o["node"])}</code> ({e(members(o))}): '
                    f"<code>{e(m)}</code> {fmt(o['median'], unit)} against {fmt(o['reference'], unit)} ({e(vs)})</li>"
                )
    if not items:
        return ""
    return (
        '<h3 id="fleet-nodes">Racks and pods that stand out</h3><p class="dim">Their chips\' median (hosts\' for '
        "a metric only a group's leader chip counts) against the typical node's (or the other one's).</p>"
        f"<ul>{''.join(items)}</ul>"
    )


INTERVAL_UNITS = ("degC", "degF", "°C", "°F")  # a report.json from before ``interval_scale``: its units decide


def _interval_scale(fleet: dict, units: dict) -> set[str]:
    """The metrics on an interval scale (degC: a difference in degrees, never a percent): ``report.json``'s
    ``fleet.interval_scale``, or for one written before that key, the metrics whose unit is a temperature's."""
    if "interval_scale" in fleet:
        given = fleet["interval_scale"] or []
        if not isinstance(given, list):
            raise TypeError(f"fleet.interval_scale is {type(given).__name__}, not a list of metric names")
        return set(given)
    return {n for n, u in units.items() if u in INTERVAL_UNITS}


def _wide(table: str) -> str:
    """A table that scrolls sideways when it is wider than the page (many metrics, long node names)."""
    return f'<div class="wide">{table}</div>'


__all__ = ["fleet_section"]
