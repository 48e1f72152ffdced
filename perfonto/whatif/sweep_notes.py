"""What ``perfonto sweep`` says beside its table (text and ``--json``'s ``notes``): which tokens/s the table
shows, runs cut at the emulator's step cap, the bottleneck along a knob that is not numeric, knobs that
changed no figure (``flat_notes``: a clock, whose peaks are per second; power), and points that served
different numbers of requests.

Which tokens/s: the steady figure (``tokens_per_second``: the server at full load, ``serving.steady_window``)
unless the steady window of a point is too short to be a steady state, then the benchmark's (tokens over the
whole run, trtllm-bench's figure) for every point, and the text says why. Too short: the window holds less than
``BURST_SHARE`` of its run (the rule of the measured steady state, ``analysis.steady_state``: such a window is a
burst), or, along the first numeric knob, the steady figure moves one way and the benchmark's the other
(``DISAGREE``): a run of one or two waves of the batch, whose window is where it falls in the
waves (1,000 requests of 8192/1024 on Sohu: the steady tokens/s fell from 66,741 to 62,716 as the HBM grew
from 138 to 196 GB and the batch from 640 to 896, while the benchmark's rose from 66,565 to 67,603).
"""

from __future__ import annotations

import math

from perfonto.analysis.steady_state import BURST_SHARE

#: The steady and the benchmark figures disagree between two points when they move in opposite directions,
#: apart by more than ``DISAGREE`` (relative), each by more than ``SAME`` (below it: no move).
DISAGREE = 0.01
SAME = 0.001
#: What the table's tokens/s column is: the row key and the column's heading.
STEADY = ("tokens_per_second", "tokens/s")
BENCHMARK = ("benchmark_tokens_per_second", "tokens/s (benchmark)")


def _ok(rows: list[dict]) -> list[dict]:
    return [r for r in rows if not r.get("error")]


def _label(r: dict, knobs) -> str:
    return ", ".join(f"{k.name}={_num(k.shown(r.get(k.name)))}" for k in knobs)


def _num(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _series(rows: list[dict], x, others) -> list[list[dict]]:
    """The runnable rows of each combination of ``others``, in ``x``'s order."""
    groups: dict[tuple, list[dict]] = {}
    for r in _ok(rows):
        groups.setdefault(tuple(r.get(k.name) for k in others), []).append(r)
    return [sorted(g, key=lambda r: r[x.name]) for g in groups.values()]


def _positive(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def _against(res) -> str | None:
    """Where, along the first numeric knob, the steady tokens/s and the benchmark's move in opposite
    directions (each by more than ``DISAGREE``): the first such pair in words, else None."""
    xi = next((i for i, k in enumerate(res.knobs) if all(isinstance(v, (int, float)) for v in k.values)), None)
    if xi is None:
        return None
    x = res.knobs[xi]
    others = [k for i, k in enumerate(res.knobs) if i != xi]
    for s in _series(res.rows, x, others):
        for a, b in zip(s, s[1:]):
            figures = ("tokens_per_second", "benchmark_tokens_per_second")
            if not all(_positive(r.get(f)) for r in (a, b) for f in figures):
                continue  # a point with no steady figure (0, or none): nothing to compare
            ds = b["tokens_per_second"] / a["tokens_per_second"] - 1
            db = b["benchmark_tokens_per_second"] / a["benchmark_tokens_per_second"] - 1
            if (ds > 0) != (db > 0) and abs(ds - db) > DISAGREE and min(abs(ds), abs(db)) > SAME:
                return (
                    f"from {x.name}={_num(a[x.name])} to {_num(b[x.name])} the steady figure goes "
                    f"{a['tokens_per_second']:,.0f} → {b['tokens_per_second']:,.0f} while the benchmark's goes "
                    f"{a['benchmark_tokens_per_second']:,.0f} → {b['benchmark_tokens_per_second']:,.0f}"
                )
    return None


def table_figure(res) -> tuple[tuple[str, str], str | None]:
    """The tokens/s the table shows (``STEADY`` or ``BENCHMARK``) and, for the benchmark's, why (module
    docstring)."""
    ok = _ok(res.rows)
    short = [r for r in ok if r.get("steady_share") is not None and r["steady_share"] < BURST_SHARE]
    why = []
    if short:
        r = min(short, key=lambda r: r["steady_share"])
        why.append(
            f"the steady window of {len(short)} point(s) holds under {BURST_SHARE * 100:.0f} % of its run "
            f"({r['steady_share'] * 100:.1f} % at {_label(r, res.knobs)})"
        )
    if against := _against(res):
        why.append(against)
    if not why:
        return STEADY, None
    return BENCHMARK, (
        "note: tokens/s is the benchmark's (tokens over the whole run, trtllm-bench's figure), not the steady "
        "window's: " + "; ".join(why) + ". With so few waves of the batch the window is where it falls in them, "
        "not a steady state; give more --requests for one (the steady figure stays in --json and --out: "
        "tokens_per_second, with steady_share; MFU, the bottleneck and the shares are the window's)"
    )


def cap_note(rows: list[dict]) -> str | None:
    """The points whose run was cut at the emulator's step cap, and what to change; None when none was."""
    cut = [r for r in _ok(rows) if r.get("cut_at_steps")]
    if not cut:
        return None
    r = cut[0]
    return (
        f"warning: {len(cut)} point(s) were cut at the emulator's cap of {r['cut_at_steps']:,} steps "
        f"(emulator.project.MAX_STEPS) before their last request completed — at {r['isl']}/{r['osl']} tokens, "
        f"{r['requests']:,} of the {r['requests_requested']:,} requests asked for; their figures (requests, "
        "TTFT) are that part's: give fewer --requests, a shorter --osl, or more in flight (--concurrency, "
        "--batch)"
    )


def bottleneck_note(res) -> str | None:
    """When no crossing was located: that the bottleneck is the same at every point, or, when it is not
    (along a knob that is not numeric, or between the series), which points have which; None with crossings."""
    if res.crossings:
        return None
    ok = _ok(res.rows)
    seen: dict[str, list[str]] = {}
    for r in ok:
        if r.get("bottleneck"):
            seen.setdefault(r["bottleneck"], []).append(_label(r, res.knobs))
    if len(seen) <= 1:
        return "the bottleneck does not change along the sweep" + (f" ({next(iter(seen))})" if seen else "")
    numeric = [k.name for k in res.knobs if all(isinstance(v, (int, float)) for v in k.values)]
    where = "; ".join(f"{b} at {', '.join(pts)}" for b, pts in seen.items())
    if not numeric:
        names = [k.name for k in res.knobs]
        why = f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} not numeric: no crossing is located"
    else:
        why = f"it does not change along {numeric[0]} (crossings are located along it only)"
    return f"the bottleneck differs between the points ({where}); {why}"


#: The figures a knob must move for it to enter the projection (``flat_notes``).
MOVED = ("tokens_per_second", "benchmark_tokens_per_second", "ttft_p50_s", "itl_p50_s", "mfu")


def _why_flat(name: str) -> str:
    if name.startswith("spec.clock."):
        return (
            "the projection's peaks are per second (spec.mxu.peak_flops_*, spec.vpu.peak_flops, "
            "spec.hbm.peak_bandwidth, spec.sram.peak_bandwidth, spec.c2c.peak_bandwidth), so a clock alone "
            "changes no time; vary the peaks it drives with it (the clock sets the counters' cycles, in perfonto run)"
        )
    if name.startswith("spec.power."):
        return "power sets the energy only, which the projection does not report (perfonto run's energy counters do)"
    return "nothing the projection computes reads it here"


def flat_notes(res) -> list[str]:
    """For each knob of more than one value along which no figure moved (``MOVED``: every series of the
    other knobs equal at each of its values), that, and which knobs carry what it would change."""
    out = []
    ok = _ok(res.rows)
    for k in res.knobs:
        if len(set(k.values)) < 2:
            continue
        others = [o for o in res.knobs if o is not k]
        groups: dict[tuple, set] = {}
        for r in ok:
            groups.setdefault(tuple(r.get(o.name) for o in others), set()).add(tuple(r.get(f) for f in MOVED))
        sizes = {}
        for r in ok:
            key = tuple(r.get(o.name) for o in others)
            sizes[key] = sizes.get(key, 0) + 1
        if groups and all(len(v) == 1 for v in groups.values()) and any(n > 1 for n in sizes.values()):
            out.append(f"note: no figure changes along {k.name}: {_why_flat(k.name)}")
    return out


def requests_note(rows: list[dict], varied: set[str], given: set[str]) -> str | None:
    """That the points were asked for different numbers of requests (TensorRT-LLM's count for their
    lengths, without --requests), so their offline TTFT compares queues of different lengths."""
    asked = {r.get("requests_requested", r.get("requests")) for r in _ok(rows)}
    closed = {"concurrency", "rate", "requests"} & (varied | given)  # not the default count
    if len(asked) > 1 and not closed:  # offline: TTFT is mostly the queue, and scales with the request count
        return (
            "note: the points served different numbers of requests (without --requests each takes TensorRT-LLM's "
            "count for its lengths), so their TTFT compares queues of different lengths; give --requests N to fix it"
        )
    return None


__all__ = ["BENCHMARK", "STEADY", "bottleneck_note", "cap_note", "flat_notes", "requests_note", "table_figure"]
