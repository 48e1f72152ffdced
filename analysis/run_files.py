"""The files of a run: a run folder (``perfonto run``, ``perfonto analyze``, ``emulator.run``) or a capture's
files wherever they are, its metadata and ground truth, and reading its Parquet files with a clear error."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from perfonto.ontology.errors import PerfontoError

MANIFEST = "perfonto.json"  # what a perfonto command wrote into its output folder (``perfonto.outputs``)


class RunError(PerfontoError, ValueError):
    """A run folder without the files the analysis needs."""


class ChipsMissing(RunError):
    """The run's chips are not numbered 0 .. N − 1 (a chip without rows: dead, or its capture lost; or a
    capture numbered from another chip): the multi-chip analysis, indexed by chip number, cannot run.
    ``skipped``: the note a report that goes on without that analysis gives."""

    def __init__(self, where, chips: list[int], with_counters: bool):
        gone = sorted(set(range(max(chips) + 1)) - set(chips))
        what = "sync reads or counter rows" if with_counters else "sync reads"
        said = (
            f"{where}: the chips are numbered {', '.join(map(str, chips))}; the multi-chip analysis (collective "
            f"waits, the straggler, skew, load imbalance) indexes them and needs them numbered 0 .. {len(chips) - 1}"
            + (
                f", and chip(s) {', '.join(map(str, gone))} have no {what} (a dead chip, or its capture lost?)"
                if gone
                else ""
            )
        )
        super().__init__(
            said + " — if the numbers are only shifted, renumber the chip column of the run's files; a missing "
            "chip's data cannot be replaced by renumbering"
        )
        self.skipped = said + ": it is skipped, and the rest of the report is over the chips with rows"


def read_parquet(path, columns: list[str] | None = None, schema_only: bool = False):
    """A run's Parquet file (its table, or only its schema), a file pyarrow cannot read refused naming it.

    Raises:
        RunError: the file is not Parquet, is cut short or is damaged (pyarrow's message names no file).
    """
    try:
        return pq.read_schema(str(path)) if schema_only else pq.read_table(str(path), columns=columns)
    except (OSError, pa.ArrowException) as exc:
        raise RunError(
            f"{path}: not a readable Parquet file ({exc}); was it overwritten? write the run again "
            "(`perfonto run` or `perfonto analyze`)"
        ) from None


@dataclass
class Run:
    """The files of a run: a run folder, or a capture's files wherever they are (``files`` maps a
    run-folder file name such as ``sync.parquet`` to where that part of the capture is)."""

    path: Path
    meta: dict
    ground_truth: dict | None
    files: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def open(cls, path: str | Path) -> "Run":
        """A run folder. Files the folder does not hold are looked up in its manifest's ``inputs``
        (``perfonto analyze`` records where the capture it analysed lives).

        Raises ``RunError`` when the sync reads or the counters are missing."""
        p = Path(path)
        files: dict[str, Path] = {}
        manifest = p / MANIFEST
        if manifest.is_file():
            try:
                inputs = json.loads(manifest.read_text(encoding="utf-8")).get("inputs", {}) or {}
            except (OSError, ValueError, AttributeError):
                inputs = {}
            for name, where in inputs.items() if isinstance(inputs, dict) else ():
                if isinstance(where, str) and not (p / name).exists():
                    files[name] = Path(where)
        run = cls(p, {}, None, files)
        for name in ("sync.parquet", "counters.parquet"):
            if not run.file(name).exists():
                raise RunError(
                    f"{p}: no {name}; is this the output folder of `perfonto run`, `perfonto analyze` "
                    f"(given --sync) or emulator.run?"
                )
        return run._with_meta()

    @classmethod
    def of(cls, counters, sync, trace=None, ground_truth: dict | None = None, meta: dict | None = None) -> "Run":
        """A capture's files wherever they are (``perfonto analyze``)."""
        files = {"counters.parquet": Path(str(counters)), "sync.parquet": Path(str(sync))}
        if trace is not None:
            files["trace.parquet"] = Path(str(trace))
        run = cls(files["sync.parquet"].parent, dict(meta or {}), ground_truth, files)
        return run if meta is not None else run._with_meta()

    def _with_meta(self) -> "Run":
        c = self.file("counters.parquet")
        meta = {}
        if c.is_file() and c.suffix in (".parquet", ".pq"):
            try:
                schema = pq.read_schema(str(c))
                meta = (
                    json.loads(schema.metadata[b"perfonto"])
                    if schema.metadata and b"perfonto" in schema.metadata
                    else {}
                )
            except (OSError, ValueError, pa.ArrowInvalid):
                meta = {}
        gt_path = self.file("ground_truth.json")
        gt = self.ground_truth
        if gt is None and gt_path.is_file():
            try:
                gt = json.loads(gt_path.read_text())
            except (OSError, ValueError):
                gt = None
        return Run(self.path, meta if isinstance(meta, dict) else {}, gt, self.files)

    @property
    def duration_ns(self) -> float:
        if "duration_ns" in self.meta:
            return float(self.meta["duration_ns"])
        if self.ground_truth:
            return float(self.ground_truth["duration_s"]) * 1e9
        raise RunError(f"{self.path}: the counters' metadata gives no duration_ns")

    def file(self, name: str) -> Path:
        return self.files.get(name, self.path / name)


__all__ = ["MANIFEST", "ChipsMissing", "Run", "RunError", "read_parquet"]
