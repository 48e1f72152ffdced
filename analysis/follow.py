"""Follow a counter dump that grows: a folder of part files appended over time, or one dump file
rewritten with more samples (appended to, or rewritten to keep only its latest samples: a ring file).

Each part is read by ``read_part`` (``analysis/follow_parts.py``, beside the readers of a file's new
rows), a small adapter over the collector-format reader (``capture.dump.read_counters``: wide or long
layout, Parquet/Arrow/CSV, host + chip keys, partial dumps). Another reader can be passed as the
``reader`` argument of ``Follower``: it only needs a ``SampleBlock`` per part (it is then read whole
each time).

Rules (what a fleet operator's collector does, and what a reader cannot know):
- **Samples are counted once.** Per chip, the last sample counted is remembered: a sample at or before
  it is skipped (a ring file rewritten with its latest samples, a part that repeats samples, a part
  that arrives after later ones: the message says how many were skipped and why). A new baseline is
  started only where time really restarts: a sample before the first one counted since the last
  baseline (a device reset, a restarted collector); then no window spans the jump, and it is said.
- **Folder.** Parts are the folder's ``*.parquet``, ``*.arrow`` and ``*.csv`` files (names starting with ``.``
  or ``_`` are a writer's temporary files and ignored). Every new part is taken, whatever its name; the
  parts found in one poll are taken in the order of their samples' time (``part-10`` after
  ``part-9`` included), except where time goes back between parts adjacent in name order (a
  restarted collector: ``follow_parts.eras``): the parts named after the jump follow, from a new baseline.
  Windows continue across parts: a part's first sample closes the window that the
  previous part's last sample opened. A part is watched after it is taken until it has not changed for
  ``settle_s`` seconds: rows appended to it meanwhile (a CSV part still being written) are read then.
- **One file.** When its size or modification time changes, the samples after the last one counted are
  read; trailing samples that some chip has not written yet are held back until it has (in a CSV part
  too). A CSV file's position moves only once its new rows read: a read that fails is tried again.
- **Memory.** Only new rows are read in full: of a CSV file, the bytes past the last whole line taken
  (a half-written last line waits); of a Parquet file, the key columns, then only the row groups that
  hold new rows; an Arrow file is memory-mapped. So memory follows the new rows, not the file.
- **Unreadable parts.** A part that does not read may still be being written: it is retried until it
  has not changed for ``settle_s`` seconds; then it is reported (``errors``) and skipped. Parts named
  after it wait for it. An empty file is waited for (it is still to be written).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa

from perfonto.metrics.windows import DumpError, read_counters
from perfonto.ontology.resolved import Generation

from .follow_parts import (
    PartError,
    Tracked,
    after_restart,
    block_of,
    csv_rows,
    eras,
    hold_incomplete,
    natural,
    parquet_rows,
    read_part,
    stat,
    tool_capture,
)
from .live import SampleBlock


Reader = Callable[[Path, Generation], SampleBlock]
Key = tuple  # (host or None, chip)


_MIN = np.iinfo(np.int64).min


class Follower:
    """New samples of a growing dump (module docstring). ``path``: a folder of parts or one file;
    ``max_parts``: new parts read per poll at most (the rest wait for the next poll). ``problem``: why
    the source is degraded now (the followed path gone, the folder unreadable), else None.

    Raises (constructor):
        FileNotFoundError: ``path`` does not exist.
    """

    def __init__(
        self,
        path: str | Path,
        gen: Generation,
        reader: Reader = read_part,
        settle_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        max_parts: int = 16,
    ):
        self.path = Path(path)
        if not self.path.exists():
            raise FileNotFoundError(f"{self.path}: no such file or folder to follow")
        other = tool_capture(self.path)
        if other is not None:
            raise PartError(
                f"{self.path}: {other} output; --follow reads the collector format only (a growing .parquet, "
                f".arrow or .csv dump, or a folder of its parts): analyse this capture with `perfonto analyze "
                f"{self.path} --out DIR`"
            )
        self.gen, self.reader, self.settle_s, self.clock = gen, reader, settle_s, clock
        self.max_parts = max_parts
        self.is_dir = self.path.is_dir()
        self._taken: set[str] = set()  # folder: the parts taken (or skipped)
        self._watch: dict[str, Tracked] = {}  # folder: parts taken that may still grow
        self._file = Tracked()
        self._pending: dict[str, tuple[tuple[int, int, int] | None, float, str]] = {}  # part -> (stat, since, error)
        self._last: dict[Key, int] = {}  # per chip: the last sample counted
        self._first: dict[Key, int] = {}  # per chip: the first sample counted since the last baseline
        self._dropped = 0  # rows the last read skipped as counted already
        self.parts = 0
        self.skipped = 0
        self.problem: str | None = None

    def poll(self) -> tuple[list[SampleBlock], list[str]]:
        """Read what is new since the last call: (blocks to push in order, messages about skipped parts
        or samples, new baselines). Never raises for a bad part; the message names it."""
        return self._poll_dir() if self.is_dir else self._poll_file()

    # -- reading only the new rows ---------------------------------------------------------------

    def _read(self, p: Path, tr: Tracked) -> SampleBlock | None:
        """The samples of ``p`` after the last ones counted (None: no new row). Raises ``PartError``."""
        self._dropped = 0
        if self.reader is not read_part:
            return self.reader(p, self.gen)
        try:
            table = self._new_rows(p, tr)
            block = None
            if table is not None and table.num_rows:
                block = block_of(read_counters(table, self.gen), str(p), self.gen)
        except (DumpError, OSError) as exc:
            raise PartError(str(exc).replace("<table>", str(p))) from None
        tr.commit()  # CSV: the position moves once the rows read
        return block

    def _new_rows(self, p: Path, tr: Tracked) -> pa.Table | None:
        from perfonto.capture.dump import csv_types
        from perfonto.capture.dump_io import read_one

        name = p.name.lower()
        tr.read = None
        if name.endswith(".csv"):
            table = csv_rows(p, tr, csv_types(self.gen))
        elif name.endswith((".parquet", ".pq")):
            return self._parquet_rows(p)
        else:
            table = read_one(p, "counter dump", csv_types(self.gen))  # Arrow: memory-mapped
        if table is None:
            return None
        table = self._filter(table, self._new_mask(table, str(p)))
        if name.endswith(".csv"):
            tr.read = table
            table = hold_incomplete(table, tr, str(p))  # a sample some chip has not written yet waits
        return table

    def _filter(self, table: pa.Table, mask: np.ndarray) -> pa.Table:
        self._dropped = int((~mask).sum())
        return table if mask.all() else table.filter(pa.array(mask))

    def _parquet_rows(self, p: Path) -> pa.Table | None:
        table, self._dropped = parquet_rows(p, self._new_mask, not self._last)
        return table

    def _new_mask(self, t: pa.Table, label: str) -> np.ndarray:
        """Rows after the last sample counted of their chip; where time restarts (a row before the first
        sample counted since the last baseline), the rows after the restart only (``after_restart``:
        a ring file that holds samples from both sides of a device reset has its old ones counted)."""
        from perfonto.capture.dump import _keys
        from perfonto.capture.dump_io import _meta

        if not self._last or t.num_rows == 0:
            return np.ones(t.num_rows, dtype=bool)
        chip, host, ts = _keys(t, label, _meta(t, label).get("timestamp_unit"))
        last, first = np.full(len(chip), _MIN), np.full(len(chip), _MIN)
        for k, v in self._last.items():
            sel = chip == k[1] if k[0] is None or host is None else (chip == k[1]) & (host == k[0])
            last[sel], first[sel] = v, self._first.get(k, _MIN)
        if np.any(ts < first):
            return after_restart(chip, host, ts, first)
        return ts > last

    # -- counting each sample once ----------------------------------------------------------------

    def _take(self, block: SampleBlock, trim: bool, restart: bool = False) -> tuple[SampleBlock | None, list[str]]:
        """``block``'s samples after the last ones counted (module docstring); ``trim``: hold back trailing
        samples that some chip has not written yet; ``restart``: time restarts at ``block`` (a new baseline)."""
        keys = [(None if block.hosts is None else block.hosts[c], int(ch)) for c, ch in enumerate(block.chips)]
        ts = block.timestamps_ns
        present = block.present if block.present is not None else np.ones(ts.shape, dtype=bool)
        first = np.array([self._first.get(k, _MIN) for k in keys])
        msgs = []
        if restart or np.any(present & (ts < first[None, :])):
            block.new_baseline = True
            self._first.clear()
            self._last.clear()
            msgs.append(
                f"{Path(block.source).name}: timestamps go back before the first sample counted (device reset "
                "or restarted collector): new baseline"
            )
        last = np.array([self._last.get(k, _MIN) for k in keys])
        old = (present & (ts <= last[None, :])).any(axis=1)
        i0 = int(np.flatnonzero(old)[-1]) + 1 if old.any() else 0
        S = block.samples
        while trim and S > i0 and not present[S - 1].all():
            S -= 1
        self._dropped += i0
        if S <= i0:
            return None, msgs
        out = block if (i0, S) == (0, block.samples) else block.slice(i0, S)
        for c, k in enumerate(keys):
            col = out.timestamps_ns[:, c][present[i0:S, c]]
            if col.size:
                self._last[k] = int(col[-1])
                self._first.setdefault(k, int(col[0]))
        return out, msgs

    # -- one file ---------------------------------------------------------------------------------

    def _poll_file(self) -> tuple[list[SampleBlock], list[str]]:
        tr = self._file
        sig = stat(self.path)
        if sig is None:
            self.problem = f"{self.path}: the followed file is gone; waiting for it"
            return [], [self.problem]
        self.problem = None
        if sig == tr.sig or sig[0] == 0:  # unchanged, or still empty
            return [], []
        shrunk = tr.sig is not None and sig[0] < tr.sig[0]
        try:
            block = self._read(self.path, tr)
        except PartError as exc:
            err = self._settled_error(self.path, str(exc))
            if err is None:
                return [], []  # read again from the same place at the next poll
            tr.sig = sig
            tr.commit(skip=True)
            self.skipped += 1
            return [], [f"skipped this version of {self.path.name}: {err}"]
        self._pending.pop(self.path.name, None)
        tr.sig = sig
        out, msgs = (None, []) if block is None else self._take(block, trim=True)
        self._keep_carry(tr)
        if out is None:
            if shrunk or not self.path.name.lower().endswith(".csv"):
                msgs.append(
                    f"{self.path.name} changed but holds no sample after the last one counted (truncated, or "
                    "rewritten with samples already counted): nothing new"
                )
            return [], msgs
        self.parts += 1
        return [out], msgs

    def _keep_carry(self, tr: Tracked) -> None:
        """CSV: the rows read but held back (a sample some chip has not written yet) are read again with
        the next lines (their bytes are taken)."""
        t, tr.read = tr.read, None
        if t is not None and t.num_rows:
            mask = self._new_mask(t, str(self.path))
            tr.carry = t.filter(pa.array(mask)) if mask.any() else None

    # -- a folder of parts ------------------------------------------------------------------------

    def _candidates(self) -> list[Path]:
        try:
            names = sorted(
                (
                    e.name
                    for e in os.scandir(self.path)
                    if e.name.endswith((".parquet", ".arrow", ".csv"))
                    and not e.name.startswith((".", "_"))
                    and e.name not in self._taken
                    and e.is_file()
                ),
                key=natural,
            )
        except OSError as exc:
            raise PartError(f"{self.path}: cannot list the folder ({exc.strerror}); waiting for it") from None
        return [self.path / n for n in names]

    def _settled_error(self, p: Path, msg: str) -> str | None:
        """None while ``p`` may still be being written; the message once it has settled."""
        sig, now = stat(p), self.clock()
        seen = self._pending.get(p.name)
        if seen is None or seen[0] != sig:
            self._pending[p.name] = (sig, now, msg)
            return None
        if now - seen[1] < self.settle_s:
            return None
        del self._pending[p.name]
        return msg

    def _poll_dir(self) -> tuple[list[SampleBlock], list[str]]:
        try:
            parts = self._candidates()
        except PartError as exc:
            self.problem = str(exc)
            return [], [str(exc)]
        self.problem = None
        got, msgs = self._new_parts(parts[: self.max_parts])
        grown = self._grown(msgs)
        new = {id(b) for b in got}
        # in time, whatever the names; but where time goes back between parts adjacent in name order (a
        # restart: ``eras``), the parts after it follow those before it, from a new baseline
        era = dict(zip(map(id, got), eras(got)))
        blocks, seen = [], 0
        for b in sorted(got + grown, key=lambda b: (era.get(id(b), 0), int(b.timestamps_ns[0].min()))):
            self._dropped = 0
            out, m = self._take(b, trim=False, restart=era.get(id(b), 0) > seen)
            seen = era.get(id(b), 0)
            msgs += m
            if out is not None:
                blocks.append(out)
            if self._dropped and id(b) in new:
                msgs.append(_late(Path(b.source).name, self._dropped))
        return blocks, msgs

    def _new_parts(self, parts: list[Path]) -> tuple[list[SampleBlock], list[str]]:
        got: list[SampleBlock] = []
        msgs: list[str] = []
        for p in parts:
            tr = Tracked(sig=stat(p), since=self.clock())
            try:
                block = self._read(p, tr)
            except PartError as exc:
                err = self._settled_error(p, str(exc))
                if err is None:
                    break  # retry later; parts named after it wait for it
                msgs.append(f"skipped part {p.name}: {err}")
                self.skipped += 1
                self._taken.add(p.name)
                continue
            self._pending.pop(p.name, None)
            self._taken.add(p.name)
            self.parts += 1
            if tr.sig is not None and time.time() - tr.sig[1] * 1e-9 < self.settle_s + 1.0:
                self._watch[p.name] = tr  # recently written: it may still grow
            if self._dropped:
                msgs.append(_late(p.name, self._dropped))
            if block is not None:
                got.append(block)
        return got, msgs

    def _grown(self, msgs: list[str]) -> list[SampleBlock]:
        """The new rows of parts taken that changed since (until they settle)."""
        out = []
        now = self.clock()
        for name, tr in list(self._watch.items()):
            p = self.path / name
            sig = stat(p)
            if sig == tr.sig:
                if now - tr.since >= self.settle_s:
                    del self._watch[name]
                continue
            old, (tr.sig, tr.since) = tr.sig, (sig, now)
            if sig is None:
                del self._watch[name]
                continue
            try:
                block = self._read(p, tr)
            except PartError as exc:
                err = self._settled_error(p, str(exc))
                if err is None:
                    tr.sig = old  # may still be being written: read again at the next poll
                    continue
                del self._watch[name]
                msgs.append(f"part {name} changed after it was read and no longer reads: {err}")
                continue
            self._pending.pop(name, None)
            if block is not None:
                out.append(block)
        return out


def _late(name: str, n: int) -> str:
    return (
        f"{name}: {n} rows or samples at or before the last sample counted of their chip were skipped "
        "(already counted, or a part that arrived after later ones)"
    )


class FollowSource:
    """A ``Follower`` as a live source for ``perfonto serve --follow``: ``blocks(stop)`` polls every
    ``poll_s`` seconds and yields new blocks until ``stop`` is set; ``status()`` says how many parts
    were read and skipped, how long since the latest one (``lag_s``) and the ``problem`` that degrades
    it now (the followed path gone). Messages (skipped parts, new baselines) go to ``log``; a message
    that every poll repeats (a file that stays gone) is logged once, until it stops and comes back."""

    def __init__(
        self,
        follower: Follower,
        poll_s: float = 0.5,
        log: Callable[[str], None] = lambda s: None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.follower, self.poll_s, self.log, self.clock = follower, poll_s, log, clock
        self._last_read: float | None = None
        self._said: set[str] = set()
        self.finished = False

    def start(self) -> None:
        """Nothing to start: the first poll reads what is already there."""

    def blocks(self, stop) -> Iterator[SampleBlock]:
        """Yield new samples as parts appear, until ``stop`` (a ``threading.Event``) is set."""
        while not stop.is_set():
            blocks, msgs = self.follower.poll()
            for m in msgs:
                if m not in self._said:
                    self.log(m)
            self._said = set(msgs)
            for b in blocks:
                self._last_read = self.clock()
                yield b
            if not blocks:
                stop.wait(self.poll_s)

    def close(self) -> None:
        """Nothing to release."""

    def status(self) -> dict:
        """``kind``, ``parts`` read, ``errors`` (parts skipped), ``lag_s`` since the latest part, ``problem``."""
        f = self.follower
        return {
            "kind": "follow",
            "path": str(f.path),
            "parts": f.parts,
            "errors": f.skipped,
            "error": None,
            "problem": f.problem,
            "lag_s": None if self._last_read is None else self.clock() - self._last_read,
            "finished": False,
        }
