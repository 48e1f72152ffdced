"""Guided findings of a run: for the headline and every threshold crossed, what it is, the evidence,
the estimated gain if its cause were removed, and the next metric to look at.

The rules are the catalog's (``metrics.findings``: data in ``*.findings.yaml``). A rule fires when its
metric crosses its declared threshold. Its gain is estimated first from the share of time the cause
takes (Amdahl's law): removing a share ``s`` of the time whole speeds the run up by ``1 / (1 − s)``, an
estimated gain of ``s / (1 − s)`` (Nsight Compute's rules give their "estimated speedup" the same way,
from the share of time an issue takes). It is an estimate, not a bound: removing a cause can shift
other work too (a re-projection measured +16.4 % where a slow chip's wait estimated +15.9 %), and a
cause that is only reduced (work rebalanced, not removed) gains less. The gains of several findings do
not add up: a level-1 node's share holds its children's, so a parent is listed after the children that
crossed too, with ``overlaps`` naming them — or, when those children hold (nearly) all of its share, not
listed at all: each child says it is ``within`` that parent. ``over: chip_max`` takes the largest per-chip
share — chips in lock step finish a step together, so the step shortens by the longest wait. Where the run came from
the emulator, ``perfonto findings --reproject`` (``perfonto.whatif.reproject``) repeats it without
the cause and adds the measured gain beside the estimate.

A crossed threshold with no rule is still a finding, with no estimate ("no rule sizes it"). A rule fires on
the evidence it has: an evidence metric with no value on this run (unavailable on the generation, not
evaluated, or null) is named in ``evidence_unread`` with the reason, a share it cannot read leaves the gain
unknown, and a ``next`` metric unavailable here is not suggested.
"""

from __future__ import annotations

import math

import numpy as np

from .bottleneck import _crossed
from .evaluate import chip_names


def _fraction(graph, name: str, v: float) -> float:
    """A share metric's value as a fraction (percent / 100; a ratio as it is)."""
    return v / 100.0 if graph.all_metrics[name].unit_text in ("percent", "%") else v


def _server(ev, name: str) -> float:
    v = ev.server.get(name)
    if v is None or np.ndim(v) != 0:
        return float("nan")
    return float(v)


#: Per-chip shares this close to the largest (relative) are the same share: which of them is largest is
#: clock-drift noise, and the report names them together rather than one of them.
TIED = 1e-3


def _share(graph, ev, rule) -> tuple[float, str]:
    """(the rule's share of time as a fraction, what it was read on in words: the server level, or for
    ``chip_max`` the largest per-chip share — chip 3's, or alike on chips 0–2, 4–7 where several tie
    within ``TIED``; ``host/chip`` when the capture names hosts)."""
    if rule.share not in graph.all_metrics:  # unavailable on this generation: no share to size the gain
        return float("nan"), "the server-level share"
    if rule.over == "chip_max" and rule.share in ev.per_chip and len(ev.chips):
        per = np.asarray(ev.per_chip[rule.share], np.float64).reshape(len(ev.chips), -1)[:, 0]
        if np.isfinite(per).any():
            i = int(np.nanargmax(per))
            tied = [k for k, v in enumerate(per) if np.isfinite(v) and v >= per[i] * (1 - TIED)]
            basis = (
                f"the largest per-chip share, chip {chip_names(ev)[i]}'s"
                if len(tied) == 1
                else f"the largest per-chip share, alike on chips {_tied_text(ev, tied)}"
            )
            return _fraction(graph, rule.share, float(per[i])), basis
    return _fraction(graph, rule.share, _server(ev, rule.share)), "the server-level share"


def _tied_text(ev, cols: list[int]) -> str:
    """Chip columns ``cols`` in words: ``0–2, 4–7``, or per host ``h000/0–2, h001/2–3``."""
    hosts = getattr(ev, "hosts", None)
    if hosts is None or not any(str(h) for h in hosts):
        return _ranges([int(ev.chips[k]) for k in cols])
    by: dict[str, list[int]] = {}
    for k in cols:
        by.setdefault(str(hosts[k]), []).append(int(ev.chips[k]))
    return ", ".join(f"{h}/{r}" for h, c in by.items() for r in _ranges(c).split(", "))


def _ranges(chips: list[int]) -> str:
    """``0–2, 4–7`` for chips 0, 1, 2, 4, 5, 6, 7."""
    out, start = [], None
    for k, c in enumerate(sorted(chips)):
        if start is None:
            start = prev = c
        elif c != prev + 1:
            out.append(f"{start}–{prev}" if prev > start else str(start))
            start = c
        prev = c
        if k == len(chips) - 1:
            out.append(f"{start}–{prev}" if prev > start else str(start))
    return ", ".join(out)


#: Above this estimated gain (a cause taking over 95 % of the time) the figure says nothing an engineer
#: can size: a batch-1 decode read "memory bound: about +36807.8 % throughput" (a new user's trial).
GAIN_SHOWN_MAX = 19.0


def gain_text(gain: float | None) -> str:
    """An estimated gain as the reports print it: ``+12.3 %``; past ``GAIN_SHOWN_MAX`` ``more than +1,900 %``
    (the cause takes nearly all the time); ``—`` when unknown."""
    if gain is None:
        return "—"
    if gain > GAIN_SHOWN_MAX:
        return f"more than +{GAIN_SHOWN_MAX * 100:,.0f} %"
    return f"{gain * 100:+.1f} %"


def estimated_gain(share: float) -> float | None:
    """The estimated gain of removing a cause that takes ``share`` (0 … 1) of the time: ``s / (1 − s)``
    (throughput ×(1 + gain)); None for a share that is not a finite value in [0, 1)."""
    if not math.isfinite(share) or share < 0 or share >= 1:
        return None
    return share / (1.0 - share)


def _unread(graph, ev, names) -> dict[str, str]:
    """Of the metrics a rule reads (``names``), those with no server-level value on this run, and why: one
    unavailable on this generation (``graph.unavailable``'s reason), one not evaluated, or one that has no
    value. The finding still fires on what it has, and says what it could not read."""
    out = {}
    for n in dict.fromkeys(names):
        if n not in graph.all_metrics:
            why = graph.unavailable.get(n)
            out[n] = f"unavailable: {why}" if why else "not evaluated"
        elif not math.isfinite(_server(ev, n)):
            out[n] = "no value on this run"
    return out


def _finding(graph, ev, rule, value: float, message: str) -> dict:
    unread = _unread(graph, ev, [*rule.evidence, *([rule.share] if rule.share else [])])
    out = {
        "metric": rule.metric,
        "title": rule.title,
        "value": value,
        "unit": graph.all_metrics[rule.metric].unit_text,
        "message": message,
        "why": rule.why,
        "evidence": {n: _num(_server(ev, n)) for n in rule.evidence},
        "evidence_units": {n: graph.all_metrics[n].unit_text for n in rule.evidence if n in graph.all_metrics},
        "evidence_unread": {n: unread[n] for n in rule.evidence if n in unread},
        "next": [n for n in rule.next if n in graph.all_metrics],  # one unavailable here cannot be looked at
        "share": None,
        "share_basis": None,
        "estimated_gain": None,
        "estimate": "no share of time declared for this finding",
        "remove": dict(rule.remove),
    }
    if rule.share:
        s, out["share_basis"] = _share(graph, ev, rule)
        gain = estimated_gain(s)
        out["share"] = _num(s)
        out["estimated_gain"] = gain
        out["estimate"] = (
            "the share of time is not known on this run"
            + (f" ({rule.share}: {unread[rule.share]})" if rule.share not in graph.all_metrics else "")
            if gain is None
            else f"it takes {s * 100:.1f} % of the time ({out['share_basis']}): removing it would shorten the step "
            "many times over, past what an estimate from its share can size; look at what sets it (its level-2 split)"
            if gain > GAIN_SHOWN_MAX
            else f"removing it would gain about +{gain * 100:.1f} % throughput: it takes {s * 100:.1f} % of the time "
            f"({out['share_basis']})"
        )
        caveat = _idle_caveat(graph, ev, rule, s)
        if caveat:
            out["caveat"] = caveat
    return out


#: A resource at work less than this fraction of the share blamed on it is idle through most of it.
BUSY_OF_SHARE = 0.5


def _idle_caveat(graph, ev, rule, share: float) -> str | None:
    """Why the estimate may not be bought by a bigger resource: the rule's ``busy`` metric (how much of
    the time the links or HBM work) far below the share of time blamed on them means most of the share
    is something else (``idle_why``) — a what-if audit's decode run blamed 36.4 % of the time on link
    transfer with the links busy 0.43 % of it, and its re-projection gained +0.4 %, not +57 %."""
    if not rule.busy or rule.busy not in graph.all_metrics or not math.isfinite(share) or share <= 0:
        return None
    busy = _fraction(graph, rule.busy, _server(ev, rule.busy))
    if not math.isfinite(busy) or busy >= BUSY_OF_SHARE * share:
        return None
    return (
        f"{rule.busy} = {busy * 100:.2f} % against a {share * 100:.1f} % share of the time: the resource is at work "
        f"through little of that share, which is {rule.idle_why or 'not its work'}; the estimate assumes the whole "
        "share removed, which a faster resource does not do"
    )


def _num(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


#: The block whose links the multi-chip analysis checks for a slow one (``analysis.chip_load``: ``c2c.*``).
LINK_BLOCK = "c2c."


def name_slow_links(graph, found: list[dict], multichip: dict | None) -> list[dict]:
    """``found`` (``findings``) with each link finding — a rule whose ``busy`` metric is a link metric, e.g.
    "bound by link transfer" — saying that the slow link(s) the multi-chip analysis found
    (``multichip["slow_links"]``, ``analysis.chip_load``) are the cause, and naming them (``caveat``). A
    throttled link keeps the ring's other links waiting for it, so their mean busy share is low while the
    time goes to that link: reading it as latency ("more link bandwidth does not help") is the wrong advice.
    Unchanged without a slow link; the dicts are changed in place and returned."""
    slow = [s for s in (multichip or {}).get("slow_links") or [] if isinstance(s, dict)]
    if not slow:
        return found
    rules = {r.metric: r for r in getattr(graph, "findings", []) or []}
    for f in found:
        busy = getattr(rules.get(f.get("metric")), "busy", None)
        if isinstance(busy, str) and busy.startswith(LINK_BLOCK):
            f["caveat"] = _slow_link_text(slow, busy, f)
    return found


def _slow_link_text(slow: list[dict], busy: str, finding: dict) -> str:
    """The cause in words: the slow links (the slowest four), their rate and busy time against the median link's."""
    worst = sorted(slow, key=lambda s: s.get("rate_ratio", 1.0))[:4]
    named = "; ".join(
        f"chip {s['chip']} link {s['link']} carries its bytes at {s['rate_ratio'] * 100:.0f} % of the median "
        f"link's rate (busy {s['busy_s']:.3g} s, the median link {s['median_busy_s']:.3g} s)"
        for s in worst
    )
    more = f" and {len(slow) - len(worst)} more" if len(slow) > len(worst) else ""
    mean = (finding.get("evidence") or {}).get(busy)
    unit = (finding.get("evidence_units") or {}).get(busy, "")
    unit = " %" if unit in ("percent", "%") else f" {unit}" if unit else ""
    of = f" ({busy} = {mean:.4g}{unit} is the mean over the links)" if isinstance(mean, (int, float)) else ""
    return (
        f"a slow or throttled link is the cause: {named}{more}. The collectives wait for it, so the other links "
        f"sit idle through much of the share{of}: not latency, but that link's transfers — repair, reseat or "
        "replace it (or route around it); at the median link's rate its busy time would fall toward the others'"
    )


def findings(graph, ev, analysis, headline: dict | None) -> list[dict]:
    """The findings of a run (module docstring), the headline's first, then by estimated gain.

    ``graph``: the compiled catalog (its ``findings`` rules); ``ev``: the evaluation (server and
    per-chip values); ``analysis``: ``analysis.bottleneck.Analysis`` (its thresholds crossed);
    ``headline``: ``analysis.headline.headline``'s dict or None. Each finding is a dict with
    ``metric``, ``title``, ``value`` and ``unit``, ``message``, ``why``, ``evidence`` ({metric: server
    value}), ``next`` (metrics to look at), ``share`` (fraction) and ``share_basis``,
    ``estimated_gain`` (fraction of throughput, or None) with its ``estimate`` text, and ``remove``
    (the emulator knobs a re-projection clears)."""
    rules = {r.metric: r for r in getattr(graph, "findings", []) or []}
    crossed = {n: (v, msg) for n, v, msg in analysis.thresholds}
    if headline and headline.get("metric") and headline["metric"] not in crossed:
        m = graph.all_metrics.get(headline["metric"])
        if m is not None:
            crossed[headline["metric"]] = (_server(ev, headline["metric"]), headline.get("message", ""))
    out = []
    for name, (v, msg) in crossed.items():
        rule = rules.get(name)
        if rule is None:
            out.append(
                {
                    "metric": name,
                    "title": msg,
                    "value": _num(float(v)) if np.ndim(v) == 0 else None,
                    "unit": graph.all_metrics[name].unit_text if name in graph.all_metrics else "",
                    "message": msg,
                    "why": "",
                    "evidence": {},
                    "next": [],
                    "share": None,
                    "share_basis": None,
                    "estimated_gain": None,
                    "estimate": "no finding rule sizes it",
                    "remove": {},
                }
            )
            continue
        thr = graph.all_metrics[name].threshold
        value = _server(ev, name)
        is_headline = bool(headline) and headline.get("metric") == name
        if not is_headline and thr is not None and math.isfinite(value) and not _crossed(thr[0], value, thr[1]):
            continue  # the headline is a finding even below its threshold (the level-1 bottleneck)
        text = headline["message"] if headline and headline.get("metric") == name else msg
        out.append(_finding(graph, ev, rule, _num(value), text))
    return _ordered(graph, out, headline.get("metric") if headline else None)


def _ordered(graph, out: list[dict], first: str | None) -> list[dict]:
    """The headline's finding first; then by estimated gain, a parent (``parent`` in the top-down tree)
    after every child that is a finding too, marked ``overlaps`` (its share holds theirs)."""
    names = {f["metric"] for f in out}
    children: dict[str, list[str]] = {}
    for n in names:
        m = graph.all_metrics.get(n)
        p, seen = getattr(m, "parent", None), {n}
        while p is not None and p not in seen:  # every ancestor holds this node's share (a loop: check refuses it)
            seen.add(p)
            if p in names:
                children.setdefault(p, []).append(n)
            p = getattr(graph.all_metrics.get(p), "parent", None)
    for f in out:
        f["overlaps"] = sorted(children.get(f["metric"], []))
    out = _fold_covered_parents(graph, out, first)
    names = {f["metric"] for f in out}
    depth = {n: len(children.get(n, [])) > 0 for n in names}
    out.sort(key=lambda f: (f["metric"] != first, depth[f["metric"]], -(f["estimated_gain"] or -1.0), f["metric"]))
    return out


#: a parent finding is folded into its children when their shares hold this much of its own
COVERED = 0.95


def _fold_covered_parents(graph, out: list[dict], first: str | None) -> list[dict]:
    """``out`` without the parents (not the headline) whose direct children that are findings hold at least
    ``COVERED`` of their share: the default run listed "interconnect bound +91.6 %" beside "bound by link
    transfer +91.6 %", one cause twice. Each such child says ``within`` ({metric, title, share} of the parent,
    ``with``: its sibling findings)."""
    by = {f["metric"]: f for f in out}
    drop = set()
    for f in out:
        if f["metric"] == first or not f.get("share"):
            continue
        kids = [k for k in out if getattr(graph.all_metrics.get(k["metric"]), "parent", None) == f["metric"]]
        covered = sum(k.get("share") or 0.0 for k in kids)
        if kids and covered >= COVERED * f["share"]:
            drop.add(f["metric"])
            for k in kids:
                k["within"] = {
                    "metric": f["metric"],
                    "title": f["title"],
                    "share": f["share"],
                    "with": sorted(x["metric"] for x in kids if x is not k),
                }
    return [by[n] for n in by if n not in drop]


#: the keys of a finding in report.json, with the types a reader may rely on
_TYPES = {
    "metric": str,
    "title": str,
    "message": str,
    "why": str,
    "estimate": str,
    "evidence": dict,
    "next": list,
    "remove": dict,
}


def check_findings(found, where: str) -> list[dict]:
    """``found`` (a report's ``findings``, e.g. read back from ``report.json``) checked: a list of
    objects with the keys and types ``findings`` writes, numbers finite or null, ``remove`` naming only
    emulator knobs with the value that removes each.

    Raises:
        ValueError: the first problem, naming ``where`` and the finding's index and key."""
    from perfonto.metrics.findings import KNOBS

    if not isinstance(found, list):
        raise ValueError(f"{where}: `findings` is not a list")
    for i, f in enumerate(found):
        at = f"{where}: findings[{i}]"
        if not isinstance(f, dict):
            raise ValueError(f"{at} is not an object")
        for k, t in _TYPES.items():
            if not isinstance(f.get(k, t()), t):
                raise ValueError(f"{at}.{k} is not a {t.__name__}")
        if not isinstance(f.get("metric"), str) or not isinstance(f.get("title"), str):
            raise ValueError(f"{at} has no `metric` and `title`")
        for k in ("value", "share", "estimated_gain"):
            v = f.get(k)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
                raise ValueError(f"{at}.{k} is {v!r}, not a finite number or null")
        for k, v in (f.get("remove") or {}).items():
            if k not in KNOBS or v != KNOBS[k]:
                raise ValueError(f"{at}.remove: `{k}: {v!r}` is not an emulator knob with the value that removes it")
    return found


__all__ = ["check_findings", "estimated_gain", "findings", "name_slow_links"]
