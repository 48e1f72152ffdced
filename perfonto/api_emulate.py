"""``perfonto.emulate``: the reference emulator run from Python as ``perfonto run`` runs it — the same
emulation (whole engine steps), the same output-folder guard (``perfonto.outputs``), every argument
checked at the boundary with messages in the API's words (``out=``, ``force=True``, not the CLI's flags)."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfonto.metrics import catalog as _catalog
from perfonto.ontology.diagnostics import CatalogError


@dataclass(repr=False)
class Emulation:
    """An emulated capture: ``path`` (the run folder), the files in it (``counters``, ``requests``,
    ``trace``, ``sync``: paths) and ``ground_truth`` (``ground_truth.json`` as a dict: what the emulator
    did — ``duration_s`` measured, ``steps``, ``tokens_per_second``, ``mfu``, per-chip totals …)."""

    path: Path
    counters: Path
    requests: Path
    trace: Path
    sync: Path
    ground_truth: dict

    def __repr__(self) -> str:
        g = self.ground_truth if isinstance(self.ground_truth, dict) else {}
        dur = g.get("duration_s")
        took = f"{dur:g} s" if isinstance(dur, (int, float)) else "? s"
        return (
            f"<perfonto.Emulation {self.path}: {g.get('model', '?')} on {g.get('chips', '?')} x "
            f"{g.get('generation', '?')}, {took}, {g.get('steps', '?')} engine step(s)>"
        )


#: ``emulator.run``'s parameters that ``emulate`` sets itself (not taken as ``knobs``)
SET_BY_EMULATE = frozenset(
    {"gen", "out_dir", "model", "chips", "duration_s", "sample_period_s", "isl", "osl", "seed", "warmup_steps"}
    | {"whole_steps"}
)


def _value_rules() -> dict:
    """``emulate``'s parameters and knobs checked at the boundary: name → (rule of ``perfonto.values``,
    what the parameter takes)."""
    from perfonto import values as v

    return {
        "duration": (v.duration_s, "the simulated time in seconds: a number (0.05) or text with a unit ('50ms')"),
        "sample_period": (v.duration_s, "seconds between counter samples: a number (1e-3) or text ('1ms', '100us')"),
        "seed": (lambda x, w: v.count(x, w, 0), "a whole number ≥ 0"),
        "warmup_steps": (lambda x, w: v.count(x, w, 0), "a whole number of engine steps ≥ 0"),
        "rate": (v.rate, "requests per second, a number above 0 (rate=10)"),
        "concurrency": (lambda x, w: v.count(x, w, 1), "a whole number of requests in flight ≥ 1"),
        "num_requests": (lambda x, w: v.count(x, w, 1), "a whole number of requests ≥ 1"),
        "draft_tokens": (v.draft_tokens, "a whole number of draft tokens from 0 to 16"),
        "acceptance": (v.probability, "a probability from 0 to 1"),
    }


def _checked(name: str, value, rules: dict):
    """``value`` of ``emulate``'s parameter ``name`` in its type (``"50ms"`` → 0.05).

    Raises:
        ValueRuleError: naming the parameter, the value and what it takes.
    """
    from perfonto.values import ValueRuleError

    rule, takes = rules[name]
    try:
        return rule(value, name)
    except ValueRuleError as exc:
        raise ValueRuleError(f"emulate: {exc}; {name} is {takes}") from None


def _checked_knobs(knobs: dict, rules: dict) -> dict:
    """``knobs`` checked: each one ``emulator.run`` takes, those with a value rule in their type.

    Raises:
        TypeError: a knob ``emulate`` does not take (with a did-you-mean over its parameters and knobs).
        ValueRuleError: a knob's value outside its rule.
    """
    import inspect

    from perfonto import emulator
    from perfonto.ontology.diagnostics import did_you_mean

    taken = sorted(set(inspect.signature(emulator.run).parameters) - SET_BY_EMULATE)
    for name in knobs:
        if name not in taken:
            own = [p for p in inspect.signature(emulate).parameters if p != "knobs"]
            hint = (
                did_you_mean(name, own + taken) or f"its parameters are {', '.join(own)}; its knobs {', '.join(taken)}"
            )
            raise TypeError(f"emulate() got an unexpected keyword argument {name!r}; {hint}")
    return {k: _checked(k, v, rules) if k in rules and v is not None else v for k, v in knobs.items()}


def _check_model(model) -> None:
    """Refuse a ``model`` the emulator does not know, before the run, with a case-insensitive
    did-you-mean (``"Llama-3.1-8B"`` → ``llama-3.1-8b``: names are matched exactly).

    Raises:
        WorkloadError: a ``perfonto.Error`` and ``ValueError``, naming the model and the known ones."""
    from perfonto.emulator import MODELS
    from perfonto.emulator.knobs import WorkloadError

    from perfonto.ontology.diagnostics import did_you_mean

    if isinstance(model, str) and model not in MODELS:
        hint = did_you_mean(model, sorted(MODELS))
        raise WorkloadError(
            f"emulate: unknown model {model!r}; " + (f"{hint} " if hint else "") + f"known: {', '.join(sorted(MODELS))}"
        )


def _api_words(message: str) -> str:
    """An output-folder refusal (``perfonto.outputs``, written for the CLI) in the API's words."""
    for cli, api in (
        ("add --force", "pass force=True"),
        ("give --force", "pass force=True"),
        ("--out", "`out=`"),
        ("`perfonto emulate`'s", "perfonto.emulate()'s"),
    ):
        message = message.replace(cli, api)
    return message


@contextmanager
def _output_folder(folder: Path, force: bool, catalog, command: list[str]):
    """``perfonto.outputs.output_folder`` for ``emulate``: the guard of the CLI (a file, a folder that is
    not perfonto's, a folder another perfonto command wrote — ``perfonto run``'s — refused unless
    ``force``; a user's files in a folder taken with ``force`` kept), the folder written whole or not at all.

    Raises:
        OutputError: in the API's words (``out=``, ``force=True``).
    """
    from perfonto.outputs import OutputError, _refuse_other_command, output_folder

    inputs = {"catalog": str(Path(catalog).resolve())} if catalog is not None else None
    try:
        _refuse_other_command(Path(os.path.abspath(folder)), ["perfonto", "emulate"], force)
        with output_folder(folder, command=command, force=force, inputs=inputs) as tmp:
            yield tmp
    except OutputError as exc:
        raise OutputError(_api_words(str(exc))) from None


def _remove_empty(made: list[Path]) -> None:
    """The folders ``emulate`` made, innermost first, where they are empty: never the caller's files."""
    for d in made:
        if d.is_dir() and not any(d.iterdir()):
            d.rmdir()


def emulate(
    generation: str = "sohu",
    *,
    model: str = "llama3-70b",
    chips: int = 8,
    duration: float | str = 1.0,
    sample_period: float | str = 1e-3,
    isl: int = 2048,
    osl: int = 128,
    seed: int = 0,
    warmup_steps: int = 400,
    whole_steps: bool = True,
    out: str | Path | None = None,
    force: bool = False,
    catalog: str | Path | None = None,
    **knobs,
) -> Emulation:
    """Emulate ``model`` served on ``chips`` chips of ``generation`` and write the capture (counters,
    request records, trace, sync reads, ground truth) into the run folder ``out`` — the emulation
    ``perfonto run`` makes, with its defaults, so that evaluating it gives the numbers the CLI gives.

    ``duration``: the simulated time, in seconds — a number (``0.05``) or text with a unit (``"50ms"``,
    ``"2s"``), as ``evaluate``'s ``sample_period``. ``sample_period``: the time between counter samples
    (one window each), in seconds or text (``"1ms"``, ``"100us"``); at most ``duration``. ``isl`` /
    ``osl``: prompt and output tokens per request. ``seed``: a whole number ≥ 0 (the same seed, the
    same capture). ``warmup_steps``: engine steps run before t = 0 and not measured (the server starts
    warm). ``whole_steps`` (True, as ``perfonto run``): the run ends at the end of the engine step in
    progress at ``duration``, so its tokens and its work cover the same steps (``ground_truth``'s
    ``duration_s`` is the measured time, ``requested_duration_s`` the one asked for); False: it ends at
    ``duration`` exactly, and a short run may end before any step does (no tokens counted).

    ``out``: a new or empty folder, or one perfonto wrote (replaced whole); a new temporary folder when
    None (left for the caller). A folder that is not perfonto's, or that another perfonto command wrote
    (``perfonto run``'s), is refused unless ``force`` (a user's files in it are kept), as the CLI's
    ``--out``; the folder is written whole or not at all. ``catalog``: a folder whose generation (with
    its emulator bindings) is emulated instead.

    ``knobs``: ``emulator.run``'s other arguments — ``slow_chip=(chip, factor)`` (that chip's ops take
    factor × as long, factor from 1 to 100), ``throttled_link=(chip, link, factor)``, ``router_skew``
    (a Zipf exponent), ``rate`` (requests/s, online arrivals), ``concurrency``, ``num_requests``,
    ``preset``, ``dtype``, ``draft_tokens``, ``acceptance``, ``op_snapshots`` …

    Raises:
        TypeError: a keyword ``emulate`` does not take (with a did-you-mean).
        CatalogError: the generation does not load.
        ValueError: a value outside its rule (``perfonto.values.ValueRuleError``, naming the parameter
            and what it takes), or a workload the emulator cannot run (its message says why); each a
            ``perfonto.Error``.
        perfonto.outputs.OutputError: ``out`` is a file, or a folder ``emulate`` may not replace (see above).
    """
    from perfonto import emulator

    rules = _value_rules()
    knobs = _checked_knobs(knobs, rules)
    duration_s: float = _checked("duration", duration, rules)  # "50ms" → 0.05
    period_s: float = _checked("sample_period", sample_period, rules)
    seed, warmup_steps = _checked("seed", seed, rules), _checked("warmup_steps", warmup_steps, rules)
    cat = _catalog.load_catalog(catalog, generation)
    if cat.generation is None:
        raise CatalogError(cat.diagnostics)
    args: dict[str, Any] = dict(
        model=model, chips=chips, isl=isl, osl=osl, seed=seed, warmup_steps=warmup_steps, whole_steps=whole_steps
    )
    args |= knobs
    shown = dict(duration=duration_s, sample_period=period_s) | args  # the manifest's command: this call
    command = ["perfonto.emulate", repr(generation)] + [f"{k}={v!r}" for k, v in shown.items()]
    folder = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="perfonto-emulate-"))
    # the folders this call makes (``out`` and any missing parents) are removed again if the run is refused
    made = [folder] if out is None else [d for d in (folder, *folder.parents) if not d.exists()]
    try:
        with _output_folder(folder, force, catalog, command) as tmp:
            _check_model(model)  # after the folder's guard (its refusal first, as before), before the run
            res = emulator.run(cat.generation, duration_s=duration_s, sample_period_s=period_s, out_dir=tmp, **args)
    except BaseException:
        _remove_empty(made)
        raise
    # emulator.run writes every side output (the fields are optional for results made elsewhere)
    assert res.requests_path is not None and res.trace_path is not None and res.sync_path is not None
    counters, requests, trace, sync = (
        folder / Path(f).name for f in (res.counters_path, res.requests_path, res.trace_path, res.sync_path)
    )
    return Emulation(folder, counters, requests, trace, sync, res.ground_truth)


__all__ = ["Emulation", "emulate"]
