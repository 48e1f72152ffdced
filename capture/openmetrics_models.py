"""dcgm-exporter scrapes of two GPU models side by side are refused (``capture.openmetrics``, "GPU model"):
the generation, and so every peak (memory bandwidth, power), follows the ``modelName`` label, and one
generation's peaks are right for one model only — an H200's 25 % of DRAM bandwidth was read as 0.25 × the
H100's 3.35 TB/s."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .dump_io import DumpError
from .formats import export_text

if TYPE_CHECKING:  # pragma: no cover
    from .openmetrics import Scrape


MODEL_LABEL = "modelName"  # dcgm-exporter's label naming the GPU model of a series (`NVIDIA H100 80GB HBM3`)


def one_model(scrapes: list[Scrape], mapping: dict, path: str) -> None:
    """Refuse a scrape whose matched series name more than one GPU model (dcgm-exporter's ``modelName``,
    case and repeated spaces aside): one generation's peaks (bandwidth, power) would be applied to every GPU,
    right for one model only (an H200's 25 % of DRAM was read as 0.25 × the H100's 3.35 TB/s). A model that
    changes from one scrape to the next splits the series instead, which a note names (``collector_table``).

    Raises:
        DumpError: naming the models, their GPUs and the first line of the second model's series.
    """
    model_of: dict[tuple, str | None] = {}  # series key → its model, when a selector matches it
    for sc in scrapes:
        models: dict[str, tuple[str, list[str], str]] = {}  # model key → (as written, its GPUs, the scrape's file)
        for key in sc.series:
            if key not in model_of:
                lab = dict(key[1])
                hit = MODEL_LABEL in lab and any(sel.matches(key[0], lab) for sel, _, _ in mapping.values())
                model_of[key] = lab[MODEL_LABEL] if hit else None
            model = model_of[key]
            if model is not None:
                _, gpus, _ = models.setdefault(" ".join(model.split()).casefold(), (model, [], sc.source or path))
                gpu = _gpu_of(dict(key[1]))
                if gpu not in gpus:
                    gpus.append(gpu)
        if len(models) > 1:
            raise DumpError(_two_models_message(list(models.values())))


def _gpu_of(lab: dict[str, str]) -> str:
    """A series' GPU as a message names it: ``gpu 1`` (dcgm-exporter's ``gpu`` label), with its host."""
    from .gpu_models import shown

    gpu = f"gpu {shown(lab['gpu'], 12)}" if "gpu" in lab else shown(lab.get("UUID", "?"), 48)
    host = lab.get("Hostname") or lab.get("instance")
    return f"{gpu} on {shown(host, 40)}" if host else gpu


def _two_models_message(models: list[tuple[str, list[str], str]]) -> str:
    from .gpu_models import part_of, shown

    def one(model: str, gpus: list[str]) -> str:
        part = part_of(model)
        gen = f"; --generation dcgm_{part}" if part else "; no shipped generation"
        return f"`{shown(model)}` ({', '.join(gpus[:8])}{' …' if len(gpus) > 8 else ''}{gen})"

    where = models[1][2]
    line = _first_line_naming(where, models[1][0])
    drop = f'{MODEL_LABEL}="{shown(models[1][0])}"'
    return (
        f"{where}{line}: one scrape's series name {len(models)} GPU models, "
        + " and ".join(one(m, g) for m, g, _ in models[:4])
        + (" …" if len(models) > 4 else "")
        + "; one generation's peaks (memory bandwidth, power) are right for one model only: analyse each model's "
        f"series apart, e.g. a copy of the scrapes without the other's lines (`grep -v '{drop}'`), each with the "
        "--generation of its model"
    )


def _first_line_naming(where: str, model: str) -> str:
    """``:N``, the first line of file ``where`` with the label ``modelName="model"``; "" when not found."""
    try:
        p = Path(where)
        text = (
            export_text(p, "save each scrape to a file first", "a Prometheus/OpenMetrics scrape") if p.is_file() else ""
        )
    except DumpError:
        return ""
    needle = f'{MODEL_LABEL}="{model}"'
    return next((f":{n}" for n, ln in enumerate(text.splitlines(), 1) if needle in ln and not ln.startswith("#")), "")


__all__ = ["MODEL_LABEL", "one_model"]
