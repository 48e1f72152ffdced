"""Checks of a run's energy sensors (issue 29, point 5), from the catalog's declarations
(``ontology.sensors``) and the prepared windows (``metrics.windows.Windows``).

- **Averaging windows.** A gauge that declares ``averaging_window`` (a power sensor that reports its
  trailing mean over 1 s, as NVML does on recent NVIDIA boards) gives, in a window shorter than that,
  the sensor's trailing average rather than the window's: such windows (shorter by more than 1 %, so that
  clock drift does not mark a window of the sensor's length) are marked, per gauge, with the metrics that
  read the gauge (``averaging_marks``).
- **Energy against power.** An energy counter that declares ``cross_check: {power: G, tolerance: t}``
  is compared over the run, chip by chip, with the integral of gauge ``G``: ``E_counter = Σ_w ΔE_w``
  and ``E_power = Σ_w P̄_w · Δt_w`` (``P̄_w`` the gauge's time-weighted mean in window ``w``, ``Δt_w`` its
  duration), both over the windows where both are valid, so over the same interval. A chip whose
  ``|E_counter − E_power| / E_counter`` exceeds ``t`` is reported (``cross_checks``).

Source: the Zeus project's and "Part-time Power Measurements: nvidia-smi's Lack of Attention" (Yang et
al., 2023) on NVML power averaging; the comparison of an energy counter with integrated power is the
usual validation of RAPL and NVML energy readings.
"""

from __future__ import annotations

import numpy as np

# relative: a window less than 1 % shorter than the sensor's window counts as long as it (device clocks drift by up
# to ~100 ppm and sample times jitter, so a 1 ms sample period can read 0.9999 ms; the reading is then 99.99 % the
# window's own)
_SHORT = 0.01
FIRST = 8  # window marks listed per gauge (the count covers them all)


def _per_chip(v: np.ndarray) -> np.ndarray:
    """(W, C, …) → (W, C): the instances summed (NaN if any instance is null)."""
    return v.reshape(v.shape[0], v.shape[1], -1).sum(axis=2)


def _readers(graph, signal: str) -> list[str]:
    """Metrics of ``graph`` that read ``signal``, directly or through other metrics, sorted."""
    import networkx as nx

    if graph is None or signal not in graph.graph:
        return []
    return sorted(n for n in nx.descendants(graph.graph, signal) if n in graph.metrics)


def averaging_marks(gen, windows, graph=None, chips=None) -> list[dict]:
    """Per gauge with an ``averaging_window`` that some window is shorter than: ``{"signal",
    "averaging_window_s", "windows_marked", "windows", "shortest_s", "metrics", "first": [{"window",
    "chip", "interval_s"}], "mask": bool (W, C)}``. ``windows``: ``Windows`` (``interval`` (W, C) s);
    ``graph``: the compiled catalog, to name the metrics reading the gauge; ``chips``: chip labels
    (default 0…C−1). Gauges absent from ``windows`` are skipped."""
    out = []
    interval = np.asarray(windows.interval, dtype=np.float64)
    labels = list(chips) if chips is not None else list(range(interval.shape[1]))
    for name, s in gen.signals.items():
        avg = getattr(s, "averaging_window", None)
        if avg is None or name not in windows.values:
            continue
        valid = np.isfinite(_per_chip(np.asarray(windows.values[name], dtype=np.float64))) & (interval > 0)
        mask = valid & (interval < avg * (1 - _SHORT))
        if not mask.any():
            continue
        w, c = np.nonzero(mask)
        out.append(
            {
                "signal": name,
                "averaging_window_s": avg,
                "windows_marked": int(mask.sum()),
                "windows": int(valid.sum()),
                "shortest_s": float(interval[mask].min()),
                "metrics": _readers(graph, name),
                "first": [
                    {"window": int(i), "chip": _label(labels[j]), "interval_s": float(interval[i, j])}
                    for i, j in zip(w[:FIRST], c[:FIRST])
                ],
                "mask": mask,
            }
        )
    return out


def _label(x):
    return x.item() if hasattr(x, "item") else x


def cross_checks(gen, windows, chips=None) -> list[dict]:
    """Per energy counter with a ``cross_check``: ``{"counter", "power", "tolerance", "chips": [{"chip",
    "counter_j", "power_j", "relative_difference", "covered_s"}], "disagree": [chip labels]}``, energies
    in the counter's unit (J for an energy counter), over the windows where both signals are valid.
    A chip with no valid window or a zero counter energy has ``relative_difference`` None and is not
    judged. Counters or gauges absent from ``windows`` are skipped."""
    out = []
    interval = np.asarray(windows.interval, dtype=np.float64)
    labels = list(chips) if chips is not None else list(range(interval.shape[1]))
    for name, s in gen.signals.items():
        pair = getattr(s, "cross_check", None)
        if pair is None or name not in windows.values or pair[0] not in windows.values:
            continue
        gauge, tol = pair
        g = gen.signals[gauge]
        to_counter = float((1 * g.unit * gen.registry.second).to(s.unit).magnitude)
        e = _per_chip(np.asarray(windows.values[name], dtype=np.float64))
        p = _per_chip(np.asarray(windows.values[gauge], dtype=np.float64))
        both = np.isfinite(e) & np.isfinite(p) & np.isfinite(interval)
        rows, bad = [], []
        for j in range(e.shape[1]):
            k = both[:, j]
            ec = float(e[k, j].sum())
            ep = float((p[k, j] * interval[k, j]).sum()) * to_counter
            rel = abs(ec - ep) / abs(ec) if k.any() and ec != 0 else None
            rows.append(
                {
                    "chip": _label(labels[j]),
                    "counter_j": ec,
                    "power_j": ep,
                    "relative_difference": rel,
                    "covered_s": float(interval[k, j].sum()),
                }
            )
            if rel is not None and rel > tol:
                bad.append(_label(labels[j]))
        out.append({"counter": name, "power": gauge, "tolerance": tol, "chips": rows, "disagree": bad})
    return out


def notes(marks: list[dict], checks: list[dict]) -> list[str]:
    """The report notes of ``averaging_marks`` and ``cross_checks``: one per marked gauge, one per
    counter whose chips disagree with their power gauge beyond the tolerance."""
    out = []
    for m in marks:
        reads = ", ".join(m["metrics"][:6]) + (" …" if len(m["metrics"]) > 6 else "")
        out.append(
            f"`{m['signal']}` is its sensor's trailing average over {m['averaging_window_s']:g} s: "
            f"{m['windows_marked']} of {m['windows']} window(s) are shorter (the shortest {m['shortest_s']:g} s), so "
            "there its value is the sensor's average over the last "
            f"{m['averaging_window_s']:g} s, not the window's" + (f" (read by {reads})" if reads else "")
        )
    for c in checks:
        if not c["disagree"]:
            continue
        worst = max(
            (r for r in c["chips"] if r["relative_difference"] is not None), key=lambda r: r["relative_difference"]
        )
        out.append(
            f"`{c['counter']}` and the integral of `{c['power']}` disagree beyond the declared "
            f"{c['tolerance'] * 100:g} % on {len(c['disagree'])} chip(s): the worst, chip {worst['chip']}, "
            f"{worst['counter_j']:.6g} J counted vs {worst['power_j']:.6g} J integrated "
            f"({worst['relative_difference'] * 100:.1f} %) — one of the two sensors is wrong or averaged differently"
        )
    return out


TOKEN_COUNTERS = ("seq.output_tokens", "seq.input_tokens")  # the runtime's token counters, where a catalog has them


def energy_between(gen, windows, signal: str, start_ns=None):
    """A function ``(lo, hi) -> (joules, a, b) | None`` for ``analysis.steady_state``: the increase of
    energy counter ``signal`` summed over chips and the windows that start in ``[lo, hi)`` (s since each
    chip's first sample, which is taken to be the records' time 0), with ``[a, b]`` the span those
    windows cover, and where the windows hold ``TOKEN_COUNTERS`` also the output and all tokens they
    counted over those windows (so that energy and tokens come from the same windows: request records
    time a token at its step's end on the host clock, and at a window edge a whole step's tokens can fall
    on the other side); None when no valid window lies inside, or when a window inside ``[a, b]`` is null on
    some chip (the energy would miss that window's joules while the tokens over ``[a, b]`` count them:
    a J/token silently too low)."""
    if signal not in windows.values or (start_ns is None and windows.start_ns is None):
        return None
    e = _per_chip(np.asarray(windows.values[signal], dtype=np.float64))
    tokens = True if all(n in windows.values for n in TOKEN_COUNTERS) else None
    starts = np.asarray(start_ns if start_ns is not None else windows.start_ns, dtype=np.float64)
    t = (starts - np.nanmin(starts, axis=0)) / 1e9  # each chip from its own first sample (its clock's offset out)
    ends = t + np.asarray(windows.interval, dtype=np.float64)

    def between(lo: float, hi: float):
        # the windows that start in [lo, hi): a counter counts a step's tokens when the step ends, so the window
        # that starts just before hi holds the tokens of a step ending at hi (its joules past hi: one sample period)
        inside = (t >= lo - 1e-9) & (t < hi - 1e-9)
        rows = inside.all(axis=1) & np.isfinite(e).all(axis=1)  # a window in every chip's account
        if not rows.any():
            return None
        a, b = float(t[rows].min()), float(ends[rows].max())
        span = ((t >= a - 1e-9) & (ends <= b + 1e-9)).all(axis=1)
        if (span & ~rows).any():  # a null window between a and b: its joules are unknown
            return None
        got = (float(e[rows].sum()), a, b)
        if tokens is None:
            return got
        out, inp = (_per_chip(np.asarray(windows.values[n], dtype=np.float64))[rows] for n in TOKEN_COUNTERS)
        if not (np.isfinite(out).all() and np.isfinite(inp).all()):
            return got
        return got + (float(out.sum()), float(out.sum() + inp.sum()))

    return between
