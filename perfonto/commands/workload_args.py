"""The workload and emulation options the projecting, emulating and what-if commands share (``--model``,
``--chips``, ``--isl``, ``--rate``, ``--draft-tokens``, …): each declared once, with its help text and argparse
type, so every command describes and checks it the same way; a model or generation name no shipped one has is
refused with a case-insensitive did-you-mean (``ontology.diagnostics.did_you_mean``, ``unknown_generation``)."""

from __future__ import annotations

import argparse

from .common import duration, non_negative_int, positive_int
from perfonto.ontology.diagnostics import did_you_mean

#: ``--acceptance`` when ``--draft-tokens`` is given without it (a typical draft acceptance rate).
DEFAULT_ACCEPTANCE = 0.7

DTYPES = ("fp8", "fp4", "bf16")
#: The default of ``--requests`` in a projection (``emulator.project``), as its help says it.
PROJECTED_REQUESTS = "TensorRT-LLM's count for these lengths; closed loop: 10 × the concurrency, at least 100"


def _workload_specs() -> dict[str, dict]:
    """Every workload and emulation option of the projecting and emulating commands, declared once: the
    option's name (``dest``) → its argparse keywords (``default`` included), ``what`` (the help before
    ``(default: …)``) and ``note`` (how the help says the default, where ``default`` alone does not)."""
    from .run import _non_negative_float, _slow_chip, _throttled_link

    return {
        "model": dict(
            what="model, by name or alias (emulator/data/models.yaml), e.g. llama-3.1-8b or llama3-8b",
            default="llama3-70b",
            choices=_model_names,
            metavar="MODEL",
        ),
        "chips": dict(what="chips in the group", default=8, type=positive_int),
        **_emulation_specs(_non_negative_float, _slow_chip, _throttled_link),
        "isl": dict(what="input tokens per request", default=2048, type=positive_int),
        "osl": dict(what="output tokens per request", default=128, type=positive_int),
        "dtype": dict(what="weight dtype", default="fp8", choices=DTYPES),
        "kv_dtype": dict(what="KV-cache dtype", default=None, note="fp8; bf16 with bf16 weights", choices=DTYPES),
        "preset": dict(
            what="assumption preset, from emulator/data/presets.yaml", default=None, note="the generation's"
        ),
        "engine_profile": dict(
            what="serving-engine profile (emulator/data/engine_profiles.yaml: trtllm, vllm, sohu): its kernel "
            "efficiencies and scheduler on top of the preset",
            default=None,
            note="the preset's",
            metavar="NAME",
        ),
        "mapping": dict(what="parallel mapping, e.g. tp8, tp4-dp2", default=None, note="the preset's"),
        "tp": dict(what="chips per pipeline stage", default=None, note="chips / (pp·dp)", type=positive_int),
        "pp": dict(what="pipeline stages", default=None, note="1", type=positive_int),
        "dp": dict(what="data-parallel replicas", default=None, note="1", type=positive_int),
        "ep": dict(what="expert parallelism, 1 or tp (MoE)", default=None, note="tp", type=positive_int),
        "attention_dp": dict(
            what="data-parallel attention for MoE models",
            default=None,
            note="on when tp > 1",
            action=argparse.BooleanOptionalAction,
        ),
        "batch": dict(what="the engine's max batch", default=None, note="the preset's sizing", type=positive_int),
        "rate": dict(
            what="online: Poisson arrivals at this many requests/s", default=None, note="offline", type=request_rate
        ),
        "concurrency": dict(
            what="closed loop: N requests in flight, a new one as soon as one completes (vLLM bench --max-concurrency)",
            default=None,
            note="offline; at most 10,000",
            type=_count_up_to("MAX_CONCURRENCY"),
            metavar="N",
        ),
        "requests": dict(
            what="requests in all",
            default=None,
            note=PROJECTED_REQUESTS + "; at most 1,000,000",
            type=_count_up_to("MAX_REQUESTS"),
        ),
        "draft_tokens": dict(
            what="speculative decoding / MTP: K draft tokens verified per request and step, at most 16",
            default=0,
            note="0, off",
            type=_draft_tokens,
            metavar="K",
        ),
        "acceptance": dict(
            what="with --draft-tokens: probability that each draft token is accepted",
            default=None,
            note=f"{DEFAULT_ACCEPTANCE:g}",
            type=_probability,
            metavar="A",
        ),
    }


def _model_names() -> list[str]:
    """The names and aliases ``--model`` accepts (``emulator.MODELS``), sorted."""
    from perfonto.emulator import MODELS

    return sorted(MODELS)


def _emulation_specs(non_negative_float, slow_chip, throttled_link) -> dict[str, dict]:
    """The emulation options of ``_workload_specs`` (``run``, ``serve``, ``emulate``), with ``run``'s
    argparse types for a float ≥ 0, ``CHIP:FACTOR`` and ``CHIP:LINK:FACTOR``."""
    return {
        "duration": dict(what="simulated time, e.g. 1s, 500ms, 1h", default=1.0, note="1s", type=duration),
        "sample_period": dict(
            what="counter sampling period", default=1e-3, note="1ms; 1us … the duration", type=duration
        ),
        "seed": dict(what="random seed", default=0, type=non_negative_int),
        "warmup_steps": dict(
            what="steps scheduled before t = 0 and not measured, so the run starts with a full batch",
            default=400,
            note="400; 0 = cold start",
            type=non_negative_int,
        ),
        "slow_chip": dict(
            what="make one chip's ops take FACTOR × as long, e.g. 3:1.2 (chip 3, 20 %% slower)",
            default=None,
            note="every chip at full speed",
            type=slow_chip,
            metavar="CHIP:FACTOR",
        ),
        "throttled_link": dict(
            what="make one chip-to-chip link carry 1/FACTOR of its rate, e.g. 2:5:4",
            default=None,
            note="every link at full rate",
            type=throttled_link,
            metavar="CHIP:LINK:FACTOR",
        ),
        "router_skew": dict(
            what="MoE models: Zipf exponent of the routed-expert load over the chips",
            default=0.0,
            note="0, uniform",
            type=non_negative_float,
            metavar="S",
        ),
    }


def workload_options(p, *names: str, fill_later: bool = False, **given: dict) -> None:
    """Add the workload options ``names`` (``dest`` names: ``model``, ``chips``, ``kv_dtype``, …; see
    ``_workload_specs``) to parser or group ``p``, in that order, each with the one help text every
    command shares. ``--rate`` and ``--concurrency`` go into one mutually exclusive group.

    ``fill_later``: every default is None (the command fills the defaults itself, e.g. the what-if
    points), the help still naming it. ``given[name]``: argparse keywords that replace the shared ones
    for this command (``default``, ``type``, ``choices``), and ``note``, the help's default where the
    shared one does not hold.

    Raises:
        KeyError: a name that is not a workload option (a programming error).
    """
    specs = _workload_specs()
    unknown = sorted((set(names) | set(given)) - set(specs))
    if unknown:
        raise KeyError(f"not workload options: {', '.join(unknown)}")
    exclusive = p.add_mutually_exclusive_group() if {"rate", "concurrency"} <= set(names) else None
    for name in names:
        kw = {**specs[name], **given.get(name, {})}
        if callable(kw.get("choices")):  # the models: the emulator loads only for a command that checks them
            kw["type"] = _one_of(kw.pop("choices")())
        what, note = kw.pop("what"), kw.pop("note", None)
        note = note if note is not None else kw["default"]
        if fill_later:
            kw["default"] = None
        target = exclusive if exclusive is not None and name in ("rate", "concurrency") else p
        target.add_argument("--" + name.replace("_", "-"), help=f"{what} (default: {note})", **kw)


def unknown_generation(name: str):
    """The usage error (exit 2) for ``--generation NAME`` without ``--catalog`` when no shipped generation
    is named so — with a case-insensitive did-you-mean (``SOHU`` → ``sohu``), else the shipped names — and
    checked before any work (``run`` and ``project`` refuse it alike); None for a shipped name (a
    ``CommandError`` otherwise)."""
    from perfonto.ontology.loader import shipped_generations

    from .common import CommandError, shipped_folder_hint

    shipped = shipped_generations()
    if name in shipped:
        return None
    hint = did_you_mean(name, shipped)
    return CommandError(
        f"no generation named `{name}`"
        + (f"; {hint}" if hint else f"; shipped: {', '.join(shipped)}")
        + (shipped_folder_hint(name) or " (a generation of your own: --catalog DIR)"),
        2,
    )


def _one_of(names: list[str]):
    """An argparse type: one of ``names`` exactly, else "invalid choice: 'X'; did you mean `x`?; choose from
    …" (argparse's ``choices`` names no close one)."""

    def parse(text: str) -> str:
        if text in names:
            return text
        hint = did_you_mean(text, names)
        raise argparse.ArgumentTypeError(
            f"invalid choice: {text!r}" + (f"; {hint}" if hint else "") + f" (choose from {', '.join(names)})"
        )

    return parse


def _probability(text: str) -> float:
    """``--acceptance``: a probability in [0, 1] (an argparse type applying ``perfonto.values.probability``)."""
    from perfonto.values import ValueRuleError, probability

    try:
        return probability(text, "--acceptance")
    except ValueRuleError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _count_up_to(limit_name: str):
    """An argparse type: ``positive_int`` at most ``emulator.run.<limit_name>`` (imported when parsed)."""

    def parse(text: str) -> int:
        import importlib

        v = positive_int(text)
        limit = getattr(importlib.import_module("perfonto.emulator.run"), limit_name)
        if v > limit:
            raise argparse.ArgumentTypeError(f"at most {limit:,}: {text!r}")
        return v

    return parse


def _draft_tokens(text: str) -> int:
    """``--draft-tokens``: a whole number 0 … 16 (an argparse type applying ``perfonto.values.draft_tokens``,
    the rule sweeps and scenario files use too)."""
    from perfonto.values import ValueRuleError, draft_tokens

    v = non_negative_int(text)
    try:
        return draft_tokens(v, "--draft-tokens")
    except ValueRuleError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def request_rate(text: str) -> float:
    """``--rate``: Poisson arrivals in requests/s, a finite number above 0 (an argparse type applying
    ``perfonto.values.rate``, the rule the API and ``--vary rate=`` use; anything else is a usage error)."""
    from perfonto.values import ValueRuleError, rate

    try:
        return rate(text, "rate")
    except ValueRuleError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("rate: ")) from None


__all__ = [
    "DEFAULT_ACCEPTANCE",
    "DTYPES",
    "PROJECTED_REQUESTS",
    "request_rate",
    "unknown_generation",
    "workload_options",
]
