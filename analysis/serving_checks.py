"""The energy-sensor checks and the steady-state window of one analysed capture (issue 29, points 5 and 6),
as ``analysis.capture.analyse_capture`` adds them to its report: ``report.json``'s ``energy_checks`` and
``steady_state`` sections, and the notes the terminal report prints."""

from __future__ import annotations

from . import energy_checks
from .steady_state import read_columns, steady_state

SHORT_SHARE = 0.25  # a steady-state window shorter than this share of the run gets a note


def energy_json(marks: list[dict], checks: list[dict]) -> dict | None:
    """``{"averaging": [...], "cross_checks": [...]}`` (``energy_checks``; the window masks left out), or
    None when the catalog declares neither check for a signal of the capture."""
    if not marks and not checks:
        return None
    return {"averaging": [{k: v for k, v in m.items() if k != "mask"} for m in marks], "cross_checks": checks}


def _energy_counter(graph) -> str | None:
    """The energy counter the catalog's ``energy_per_token`` divides (``power.job_energy`` in the shipped
    library), or None when the catalog has no such metric."""
    import networkx as nx

    gen = graph.generation
    if "energy_per_token" not in graph.graph:
        return None
    joule = gen.registry.joule.dimensionality
    found = sorted(
        a
        for a in nx.ancestors(graph.graph, "energy_per_token")
        if a in gen.signals and gen.registry.get_dimensionality(gen.signals[a].unit) == joule
    )
    return found[0] if found else None


def serving_checks(graph, capture, ev, chips=None) -> tuple[dict | None, dict | None, list[str]]:
    """``(energy_checks, steady_state, notes)`` of a capture evaluated in memory (``ev``: an
    ``analysis.evaluate.Evaluation`` with its windows). The steady state needs the request records
    (``capture.requests``) and ``capture.steady_state`` (a fraction of the peak concurrency; None: off);
    energy per token over it comes from the catalog's energy counter over the windows inside it.
    A steady state that cannot be found is a note, never an error."""
    gen, w = graph.generation, ev.windows
    labels = chips if chips is not None else ev.chips
    marks = energy_checks.averaging_marks(gen, w, graph, labels)
    checks = energy_checks.cross_checks(gen, w, labels)
    notes = energy_checks.notes(marks, checks)
    fraction = getattr(capture, "steady_state", None)
    if fraction is None or capture.requests is None or not graph.record_metrics:
        return energy_json(marks, checks), None, notes
    counter = _energy_counter(graph)
    energy = energy_checks.energy_between(gen, w, counter) if counter is not None else None
    try:
        ss = steady_state(graph, read_columns(capture.requests, gen), fraction, energy=energy)
    except ValueError as exc:
        notes.append(f"no steady-state window ({capture.requests}): {exc}")
        return energy_json(marks, checks), None, notes
    doc = ss.to_json() | ({"energy_counter": counter} if energy is not None else {})
    if doc["share_of_run"] is not None and doc["share_of_run"] < SHORT_SHARE:
        notes.append(
            f"the steady-state window ({ss.start:.4g} s to {ss.end:.4g} s) covers only "
            f"{doc['share_of_run'] * 100:.1f} % of the run: the requests in flight rarely stay within "
            f"{fraction * 100:g} % of their peak of {ss.peak:g} (open-loop arrivals make the peak a spike); its "
            "figures rest on few requests — give a lower --steady-state, or run longer"
        )
    return energy_json(marks, checks), doc, notes
