"""GPU model names as NVML prints them (``nvidia-smi``'s name, dcgm-exporter's ``modelName`` label, Nsight
Compute's ``device__attribute_display_name``) → the part whose datasheet figures a shipped generation holds.

Only the exact names of the parts those generations describe are matched: the SXM boards (H100 SXM5
``NVIDIA H100 80GB HBM3``: 3.35 TB/s, 700 W; H200 SXM ``NVIDIA H200``: 4.8 TB/s, 700 W). A name that merely
contains one (``NVIDIA H100 PCIe``: 2.0 TB/s, ``NVIDIA H100 NVL``: 3.9 TB/s, ``NVIDIA GH200 480GB``, ``NVIDIA
H200 NVL``: 600 W) is another part with other peaks: it matches nothing, and the reader's caller says so.
"""

from __future__ import annotations

#: exact model name (case and repeated spaces aside) → the part's key in a shipped generation's name
PARTS = {"nvidia h100 80gb hbm3": "h100", "nvidia h200": "h200"}


def part_of(name: str) -> str | None:
    """The part key (``h100``, ``h200``) of a GPU model name, or None when no shipped generation describes it."""
    return PARTS.get(" ".join(str(name).split()).casefold())


def shown(name: str, limit: int = 80) -> str:
    """A model name from a capture, fit for a message: control characters escaped (``\\x1b``), cut to
    ``limit`` characters with "…"."""
    from perfonto.ontology.diagnostics import escaped

    text = escaped(name)
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = ["PARTS", "part_of", "shown"]
