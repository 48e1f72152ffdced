"""Finding rules: what a crossed threshold means, how much removing its cause could buy, and where to
look next — data in the catalog (``*.findings.yaml``), checked against the compiled metrics.

A catalog's findings file lists rules (the shipped ones: ``metrics/library/topdown.findings.yaml``)::

    findings:
      - metric: topdown.interconnect.peer_wait   # fires when this metric crosses its threshold
        title: waiting for a slower chip at collectives
        share: topdown.interconnect.peer_wait    # the share of time the cause takes (a percent metric)
        over: chip_max                           # server (default) | chip_max: lock-step chips
        evidence: [topdown.interconnect_bound, step_time]
        next: [topdown.interconnect.link_transfer]
        remove: {slow_chip: null}                # emulator knobs that remove the cause (re-projection)
        why: the group runs at its slowest chip's pace

The gain is estimated from the share of time (Amdahl's law: removing a cause that takes a share ``s``
of the time whole speeds the run up by ``1 / (1 − s)``), as Nsight Compute's rules
state an "estimated speedup" from the share of time an issue takes. ``over: chip_max`` takes the
largest per-chip share: chips in lock step finish a step together, so the step shortens by the
wait of the chip that waits longest. ``remove`` names the emulator's knobs (``slow_chip``,
``throttled_link``, ``router_skew``) that re-create the run without the cause, for ``perfonto
findings --reproject``.

A rule whose metric (or any metric it names) does not exist is an error naming the file, line and
column; a rule over a metric unavailable on this generation is left out with a note. A rule whose share,
busy, evidence or next metric is unavailable here still fires on what it has, with a note: its finding
names the evidence it could not read (``analysis.findings``), and its gain is unknown without its share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from perfonto.ontology.diagnostics import Diagnostic, Span, did_you_mean

#: The emulator knobs a rule may remove, and the value that removes each (``emulator.knobs``; and one
#: modelling assumption, ``overlap_collectives``: collectives hidden behind compute, only their latency left).
KNOBS = {"slow_chip": None, "throttled_link": None, "router_skew": 0.0, "overlap_collectives": True}
OVER = ("server", "chip_max")
SHARE_UNITS = ("percent", "%", "ratio", "1", "dimensionless")  # a share of time: percent or a fraction
_KEYS = {"metric", "title", "share", "over", "evidence", "next", "remove", "why", "busy", "idle_why"}


@dataclass(frozen=True)
class FindingRule:
    """One rule (module docstring): ``metric`` fires it, ``share`` (a percent or fraction metric, or
    None: no gain estimate) sizes the gain, ``over`` says how chips combine, ``remove`` the knobs
    (name → the value that removes the cause) for a re-projection; ``span`` where it was declared;
    ``busy`` (a percent or fraction metric) how much of the time the resource the rule blames is at work:
    far below the share, the share is mostly something else (``idle_why``: latency, fixed per-operation
    cost), and the finding says so beside its estimate."""

    metric: str
    title: str
    share: str | None = None
    over: str = "server"
    evidence: tuple[str, ...] = ()
    next: tuple[str, ...] = ()
    remove: dict = field(default_factory=dict)
    why: str = ""
    span: Span | None = None
    busy: str | None = None  # a percent or fraction metric: how much of the time the blamed resource works
    idle_why: str = ""  # what the share is when the resource is idle through most of it


def library_findings() -> list[Path]:
    """The shipped rules (package data ``metrics/library/*.findings.yaml``)."""
    from importlib import resources

    return sorted(Path(str(resources.files("perfonto.metrics").joinpath("library"))).glob("*.findings.yaml"))


def is_findings_file(p: Path) -> bool:
    """A catalog folder's findings file (not an ontology YAML)."""
    return p.name.endswith((".findings.yaml", ".findings.yml"))


def _err(code: str, msg: str, span: Span, hint: str) -> Diagnostic:
    return Diagnostic("error", code, msg, span, hint=hint)


def _names(value, src, loc, what: str, diags: list) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        diags.append(_err("finding-field", f"`{what}` is a metric name or a list of them", src.span(loc), ""))
        return ()
    return tuple(value)


def _remove(value, src, loc, diags: list) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        diags.append(_err("finding-field", "`remove` is a mapping of emulator knobs", src.span(loc), ""))
        return {}
    out = {}
    for k, v in value.items():
        if k in KNOBS and v != KNOBS[k] and not (v is None and KNOBS[k] is None):
            diags.append(
                _err(
                    "finding-knob",
                    f"`remove: {{{k}: {v!r}}}`: a re-projection removes the cause, so `{k}` takes "
                    f"{'null' if KNOBS[k] is None else repr(KNOBS[k])}",
                    src.span(loc + (k,)),
                    f"write `{k}: {'null' if KNOBS[k] is None else KNOBS[k]}`",
                )
            )
        elif k not in KNOBS:
            diags.append(
                _err(
                    "finding-knob",
                    f"unknown emulator knob `{k}` in `remove`",
                    src.span(loc + (k,)),
                    f"use one of: {', '.join(KNOBS)}",
                )
            )
        else:
            out[k] = KNOBS[k]
    return out


def _rule(item, src, loc, diags: list) -> tuple[FindingRule | None, bool]:
    """One rule from its YAML mapping and whether it is whole: (None, False) when it has no metric or
    title to check; (the rule, False) when another field is malformed (diagnostics added), so that the
    metrics it names are still checked and every error of the rule is said at once."""
    span, before = src.span(loc), len(diags)
    if not isinstance(item, dict):
        diags.append(_err("finding-field", "a finding is a mapping with `metric` and `title`", span, ""))
        return None, False
    extra = sorted(set(item) - _KEYS)
    for k in extra:
        diags.append(
            _err(
                "finding-field",
                f"unknown key `{k}` in a finding",
                src.span(loc + (k,)),
                f"keys: {', '.join(sorted(_KEYS))}",
            )
        )
    metric, title = item.get("metric"), item.get("title")
    if not isinstance(metric, str) or not isinstance(title, str):
        diags.append(_err("finding-field", "a finding needs `metric` and `title` (text)", span, ""))
        return None, False
    over = item.get("over", "server")
    if not isinstance(over, str) or over not in OVER:  # every field is checked: all of a rule's errors at once
        diags.append(
            _err("finding-field", f"`over` is one of {', '.join(OVER)}, not {over!r}", src.span(loc + ("over",)), "")
        )
    share = item.get("share")
    if share is not None and not isinstance(share, str):
        diags.append(_err("finding-field", "`share` is a metric name", src.span(loc + ("share",)), ""))
    why = item.get("why")
    if why is not None and not isinstance(why, str):
        diags.append(_err("finding-field", "`why` is text", src.span(loc + ("why",)), ""))
    busy, idle_why = item.get("busy"), item.get("idle_why")
    if busy is not None and not isinstance(busy, str):
        diags.append(_err("finding-field", "`busy` is a metric name", src.span(loc + ("busy",)), ""))
    if idle_why is not None and not isinstance(idle_why, str):
        diags.append(_err("finding-field", "`idle_why` is text", src.span(loc + ("idle_why",)), ""))
    rule = FindingRule(
        metric,
        title,
        share if isinstance(share, str) else None,
        over if over in OVER else "server",
        _names(item.get("evidence"), src, loc + ("evidence",), "evidence", diags),
        _names(item.get("next"), src, loc + ("next",), "next", diags),
        _remove(item.get("remove"), src, loc + ("remove",), diags),
        why if isinstance(why, str) else "",
        span,
        busy if isinstance(busy, str) else None,
        idle_why if isinstance(idle_why, str) else "",
    )
    return rule, len(diags) == before  # a rule with any error is left out whole, once its metrics are checked


def _check(rule: FindingRule, graph, src, loc, diags: list, notes: list) -> bool:
    """Whether the rule can be kept: every metric it names exists (an unknown one is an error); its own
    metric unavailable on this generation leaves it out with a note, another one it names is noted and the
    rule kept; the share and busy metrics must be a percent or a fraction."""
    known = graph.all_metrics
    named = [("metric", rule.metric)] + ([("share", rule.share)] if rule.share else [])
    named += [("busy", rule.busy)] if rule.busy else []
    named += [("evidence", n) for n in rule.evidence] + [("next", n) for n in rule.next]
    ok = True
    for key, name in named:
        if name in known:
            continue
        if name in graph.unavailable:
            why = graph.unavailable[name]
            if key == "metric":  # its trigger: the rule can never fire on this generation
                note = f"{src.path}: finding `{rule.metric}` left out: `{name}` is unavailable ({why})"
                ok = False
            else:  # it fires on what it has, and the finding names what it could not read (analysis.findings)
                note = f"{src.path}: finding `{rule.metric}` fires without `{name}`: unavailable ({why})"
            if note not in notes:  # a metric named twice (as evidence and next) is noted once
                notes.append(note)
            continue
        diags.append(
            _err(
                "finding-unknown-metric",
                f"finding `{rule.title}` names unknown metric `{name}`",
                src.span(loc + (key,)),
                did_you_mean(name, known) or "name a metric of the catalog (perfonto explain --list)",
            )
        )
        ok = False
    if ok and known[rule.metric].threshold is None:
        diags.append(
            Diagnostic(
                "warning",
                "finding-never-fires",
                f"finding `{rule.title}`: `{rule.metric}` declares no threshold, so the finding never fires",
                src.span(loc + ("metric",)),
                hint=f'add `threshold OP VALUE: "message"` to `{rule.metric}`, or name a metric that has one',
            )
        )
    for key, of, what in (
        ("share", rule.share, "a share of the chips' time"),
        ("busy", rule.busy, "how much of the time the resource works"),
    ):
        if ok and of in known and known[of].unit_text not in SHARE_UNITS:  # an unavailable one is not read
            diags.append(
                _err(
                    "finding-share-unit",
                    f"`{key}` metric `{of}` is in {known[of].unit_text}, not a share of time",
                    src.span(loc + (key,)),
                    f"name a percent or dimensionless metric ({what})",
                )
            )
            ok = False
    return ok


def load_findings(paths: list[Path], graph) -> tuple[list[FindingRule], list[Diagnostic], list[str]]:
    """The rules of ``paths`` checked against the compiled ``graph``: (rules, diagnostics, notes). A later
    file's rule for the same metric replaces an earlier one (a user's catalog overrides the library's).

    Raises nothing: an unreadable or malformed file is a diagnostic naming file:line:col."""
    from perfonto.ontology.yaml_source import read_yaml

    rules: dict[str, FindingRule] = {}
    diags: list[Diagnostic] = []
    notes: list[str] = []
    for p in paths:
        src = read_yaml(p)
        diags += src.diagnostics
        if src.diagnostics:
            continue
        data = src.data if src.data is not None else {}
        items = data.get("findings") if isinstance(data, dict) else None
        if not isinstance(data, dict) or not isinstance(items, list) or set(data) - {"findings"}:
            diags.append(
                _err(
                    "finding-file",
                    "a findings file holds one key, `findings`, a list of rules",
                    src.span(()),
                    "see metrics/library/topdown.findings.yaml",
                )
            )
            continue
        seen: set[str] = set()
        for i, item in enumerate(items):
            loc = ("findings", i)
            rule, whole = _rule(item, src, loc, diags)
            if rule is None:
                continue
            if not whole:
                _check(rule, graph, src, loc, diags, notes)  # its unknown metrics too, not one error at a time
                continue
            if rule.metric in seen:
                diags.append(
                    _err(
                        "finding-field",
                        f"a second rule for `{rule.metric}` in this file",
                        src.span(loc + ("metric",)),
                        "keep one rule per metric (a catalog's own file replaces the library's rule)",
                    )
                )
                continue
            seen.add(rule.metric)
            if _check(rule, graph, src, loc, diags, notes):
                rules[rule.metric] = rule
    return list(rules.values()), diags, notes


__all__ = ["KNOBS", "FindingRule", "is_findings_file", "library_findings", "load_findings"]
