"""How the reports word the fleet section — one place for the terminal report (``perfonto.report_fleet.
render_fleet``) and the HTML page (``analysis.html_fleet``), both reading what ``analysis.fleet`` found
(the page from ``report.json``): a chip that stands out, how far a value is from its reference, what a
spread or a standing-out node is over, the share past a threshold, and each host's rack and pod."""

from __future__ import annotations

from typing import Iterable

from .report_json import format_value


def who(o: dict) -> str:
    """A chip (or, for a metric spread over hosts, a host) that stands out: ``host/chip (rack)``."""
    name = str(o["host"]) if o.get("chip") is None else f"{o['host']}/{o['chip']}"
    return name + (f" ({o['rack']})" if o.get("rack") else "")


def versus(value: float, reference: float, relative: float | None, unit: str, interval: bool) -> str:
    """How far ``value`` is from ``reference``: a signed percent of it (``relative``), or for a metric on an
    interval scale (``interval``: a unit whose zero is not its base unit's, degC) the signed difference in
    its unit (``+15.000 degC``; a percent of a Celsius reading means nothing)."""
    if relative is not None and not interval:
        return f"{relative * 100:+.1f} %"
    d = value - reference
    return ("+" if d >= 0 else "") + format_value(d, unit)


def over_hosts(sp: dict, hosts: int) -> str:
    """A leader-counted metric's spread is over hosts: how many of the ``hosts`` had a value (a host that led
    no group over the run, or one whose groups are led from another host, has none)."""
    n = sp.get("chips", hosts)
    return f" (over {n} of {hosts} hosts)" if n < hosts else " (over hosts)"


def members(o: dict) -> str:
    """What a standing-out node's median is over: its chips, or for a leader-counted metric its hosts."""
    return f"{o['hosts']} hosts" if o.get("over") == "hosts" else f"{o['chips']} chips"


def past(thr: dict | None) -> str:
    """The share of chips past a metric's threshold, with the threshold: ``12.5 % (> 80)``; a ``when parent``
    threshold says so (``25.0 % (> 5 when parent)``: chips whose parent is past its own too), and the chips
    past the bound whose parent had no value, not counted, are named with that parent (``; 1 more past it,
    not checked: t.root has no value there``). Empty without a threshold."""
    if not thr:
        return ""
    gated = " when parent" if thr.get("when_parent") else ""
    text = f"{thr['share_of_chips'] * 100:.1f} % ({thr['op']} {thr['limit']:g}{gated})"
    un = thr.get("unchecked")
    if isinstance(un, dict) and un.get("count"):
        who = ", ".join(str(p) for p in un.get("parents") or []) or "its parent"
        verb = "have" if len(un.get("parents") or []) > 1 else "has"
        text += f"; {un['count']} more past it, not checked: {who} {verb} no value there"
    return text


def host_places(chips: Iterable[tuple]) -> dict[str, dict[str, str | None]]:
    """Each host's rack and pod from its chips' (``chips``: (host, rack, pod) per chip), comma-separated where
    they differ (a topology places chips, and may split a host); None where it has none."""
    seen: dict[str, dict[str, list[str]]] = {}
    for host, rack, pod in chips:
        at = seen.setdefault(str(host), {"rack": [], "pod": []})
        for k, v in (("rack", rack), ("pod", pod)):
            if v is not None and str(v) not in at[k]:
                at[k].append(str(v))
    return {h: {k: ", ".join(v) or None for k, v in at.items()} for h, at in seen.items()}


__all__ = ["host_places", "members", "over_hosts", "past", "versus", "who"]
