"""Relabel and partition emulated hosts into a fleet dataset, and add up their ground truth.

Each host's counter dump (``counters.parquet`` of one ``emulator.run``, chips numbered 0 … n − 1 as
every host numbers them) is written as ``<out>/counters/host=<host>/part-0.parquet`` — the host is the
Hive partition, not a column — with row groups of ``ROW_GROUP_ROWS`` rows and zstd compression, so
that a reader can skip to a time range. Hosts that share a profile share one emulation: the file is
written once and copied. ``node_truth`` adds the per-chip ground truth of any set of chips into a
ground-truth dictionary of the shape ``emulator.groundtruth`` gives for one run (sums of bytes, FLOPs,
tokens, energy, busy and top-down seconds; ``chips``; ``duration_s``), so that the same truth table
checks a host, a rack, a pod or the fleet.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq

ROW_GROUP_ROWS = 8192


def write_host(src: Path, out: Path, host: str, reuse: Path | None = None) -> Path:
    """Write (or copy from ``reuse``) one host's dump into the partitioned dataset ``out``."""
    folder = out / f"host={host}"
    folder.mkdir(parents=True, exist_ok=True)
    dst = folder / "part-0.parquet"
    if reuse is not None:
        shutil.copyfile(reuse, dst)
        return dst
    pf = pq.ParquetFile(str(src))
    with pq.ParquetWriter(str(dst), pf.schema_arrow, compression="zstd") as w:
        for batch in pf.iter_batches(batch_size=ROW_GROUP_ROWS):
            w.write_batch(batch, row_group_size=ROW_GROUP_ROWS)
    return dst


def _add(acc: dict, d: dict) -> None:
    for k, v in d.items():
        if isinstance(v, bool) or k in ("chip",):
            continue
        if isinstance(v, (int, float)):
            acc[k] = acc.get(k, 0.0) + float(v)
        elif isinstance(v, dict) and all(isinstance(x, (int, float)) for x in v.values()):
            sub = acc.setdefault(k, {})
            for kk, x in v.items():
                sub[kk] = sub.get(kk, 0.0) + float(x)


def node_truth(fleet_truth: dict, chips: list[tuple[str, int]]) -> dict:
    """Ground truth of the chips ``chips`` ((host, chip) pairs) of a fleet's ``ground_truth.json``,
    shaped as one run's (``emulator.groundtruth``): per-chip quantities summed, ``chips`` counted,
    ``duration_s`` the hosts' (the same for every host), ``tokens`` = input + output tokens."""
    acc: dict = {}
    duration = None
    for host, chip in chips:
        gt = fleet_truth["hosts"][host]["truth"]
        duration = gt["duration_s"]
        _add(acc, gt["per_chip"][int(chip)])
    acc["tokens"] = acc.get("input_tokens", 0.0) + acc.get("output_tokens", 0.0)
    acc["chips"] = len(chips)
    acc["duration_s"] = duration
    return acc
