"""Follow a counter dump that grows: a folder of Parquet part files appended over time, or one dump
file rewritten with more samples.

Each part is read by ``read_part``, a small adapter over the collector-format reader
(``capture.dump.read_counters``: wide or long layout, Parquet/Arrow/CSV, host + chip keys, partial
dumps). Another reader can be passed as the ``reader`` argument of ``Follower``: it only needs a
``SampleBlock`` per part.

Rules (what a fleet operator's collector does, and what a reader cannot know):
- **Folder.** Parts are the folder's ``*.parquet``, ``*.arrow`` and ``*.csv`` files, taken in name order
  (``part-000001.parquet``, …; names starting with ``.`` or ``_`` are a writer's temporary files and ignored); a part is
  read once, when it appears. Windows continue across parts: a part's first sample closes the window that
  the previous part's last sample opened.
- **One file.** When its size or modification time changes, it is read again and the samples after
  the ones already pushed are new; trailing samples that some chip has not written yet are held back
  until it has. If its first samples are no longer the ones pushed (the file was replaced), the whole
  file is pushed from a new baseline.
- **Unreadable parts.** A part that does not read may still be being written: it is retried until it
  has not changed for ``settle_s`` seconds; then it is reported (``errors``) and skipped. Later parts
  wait for it, so samples are never pushed out of order.
- **Time going back.** A part whose first sample is not after the last pushed one of some chip (a
  device reset, a restarted collector) starts a new baseline: no window spans the jump.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from perfonto.metrics.windows import DumpError, read_counters
from perfonto.ontology.resolved import Generation

from .live import SampleBlock
from perfonto.ontology.errors import PerfontoError


class PartError(PerfontoError, ValueError):
    """A part that cannot be read as the generation's counters (the message says which and why)."""


def read_part(path: str | Path, gen: Generation) -> SampleBlock:
    """Read one part (or a whole dump) as a ``SampleBlock`` through the collector-format reader
    (``capture.dump.read_counters``: wide or long layout, Parquet, Arrow or CSV, host + chip keys; its
    grid, null and sentinel handling apply). A signal the part does not hold is read as a null
    register, so the metrics that need it have null windows (their series are left out).

    Raises:
        PartError: the reader's ``DumpError``, or an ``OSError`` reading the file.
    """
    try:
        dump = read_counters(path, gen)
    except (DumpError, OSError) as exc:
        raise PartError(str(exc)) from None
    raw, missing = dict(dump.raw), dict(dump.missing)
    S, C = dump.timestamps_ns.shape
    for name in dump.absent:
        n = gen.signals[name].instances
        raw[name] = np.zeros((S, C, n), dtype=np.uint64)
        missing[name] = np.ones((S, C, n), dtype=bool)
    present = None if dump.present.all() else dump.present
    hosts = None if dump.hosts is None else tuple(str(h) for h in dump.hosts)
    return SampleBlock(dump.timestamps_ns, raw, dump.chips, present, missing, hosts, False, str(path))


Reader = Callable[[Path, Generation], SampleBlock]


class Follower:
    """New samples of a growing dump (module docstring). ``path``: a folder of parts or one file.

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
    ):
        self.path = Path(path)
        if not self.path.exists():
            raise FileNotFoundError(f"{self.path}: no such file or folder to follow")
        other = _tool_capture(self.path)
        if other is not None:
            raise PartError(
                f"{self.path}: {other} output; --follow reads the collector format only (a growing .parquet, "
                f".arrow or .csv dump, or a folder of its parts): analyse this capture with `perfonto analyze "
                f"{self.path} --out DIR`"
            )
        self.gen, self.reader, self.settle_s, self.clock = gen, reader, settle_s, clock
        self.is_dir = self.path.is_dir()
        self._last_name = ""  # folder: the last part taken (in name order)
        self._pending: dict[str, tuple[tuple[int, int], float, str]] = {}  # part -> (stat, first failure, error)
        self._file_sig: tuple[int, int] | None = None
        self._file_n = 0
        self._last_ts: np.ndarray | None = None
        self.parts = 0
        self.skipped = 0

    def poll(self) -> tuple[list[SampleBlock], list[str]]:
        """Read what is new since the last call: (blocks to push in order, messages about skipped parts
        or new baselines). Never raises for a bad part; the message names it."""
        return self._poll_dir() if self.is_dir else self._poll_file()

    def _stat(self, p: Path) -> tuple[int, int] | None:
        try:
            st = p.stat()
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns

    def _candidates(self) -> list[Path]:
        try:
            names = sorted(
                e.name
                for e in os.scandir(self.path)
                if e.name.endswith((".parquet", ".arrow", ".csv"))
                and not e.name.startswith((".", "_"))
                and e.is_file()
                and e.name > self._last_name
            )
        except OSError as exc:
            raise PartError(f"{self.path}: cannot list the folder ({exc.strerror})") from None
        return [self.path / n for n in names]

    def _settled_error(self, p: Path, msg: str) -> str | None:
        """None while ``p`` may still be being written; the message once it has settled."""
        sig, now = self._stat(p), self.clock()
        seen = self._pending.get(p.name)
        if seen is None or seen[0] != sig:
            self._pending[p.name] = (sig, now, msg)
            return None
        if now - seen[1] < self.settle_s:
            return None
        del self._pending[p.name]
        return msg

    def _poll_dir(self) -> tuple[list[SampleBlock], list[str]]:
        blocks, msgs = [], []
        try:
            parts = self._candidates()
        except PartError as exc:
            return [], [str(exc)]
        for p in parts:
            try:
                block = self.reader(p, self.gen)
            except PartError as exc:
                err = self._settled_error(p, str(exc))
                if err is None:
                    break  # retry later; later parts wait for this one
                msgs.append(f"skipped part {p.name}: {err}")
                self.skipped += 1
                self._last_name = p.name
                continue
            self._pending.pop(p.name, None)
            self._last_name = p.name
            self.parts += 1
            msgs += self._continuity(block)
            blocks.append(block)
        return blocks, msgs

    def _continuity(self, block: SampleBlock) -> list[str]:
        msgs = []
        if self._last_ts is not None and (
            len(self._last_ts) != block.timestamps_ns.shape[1] or np.any(block.timestamps_ns[0] <= self._last_ts)
        ):
            block.new_baseline = True
            msgs.append(
                f"{Path(block.source).name}: timestamps go back (device reset or restarted collector): new baseline"
            )
        if block.samples:
            self._last_ts = np.array(block.timestamps_ns[-1])
        return msgs

    def _poll_file(self) -> tuple[list[SampleBlock], list[str]]:
        sig = self._stat(self.path)
        if sig is None:
            return [], [
                f"{self.path}: the followed file disappeared; waiting for it"
            ] if self._file_sig is not None else []
        if sig == self._file_sig:
            return [], []
        try:
            block = self.reader(self.path, self.gen)
        except PartError as exc:
            err = self._settled_error(self.path, str(exc))
            if err is None:
                return [], []
            self._file_sig = sig
            self.skipped += 1
            return [], [f"skipped this version of {self.path.name}: {err}"]
        self._pending.pop(self.path.name, None)
        self._file_sig = sig
        S = block.samples
        if block.present is not None:  # trailing samples some chip has not written yet: wait for them
            while S > 0 and not block.present[S - 1].all():
                S -= 1
        n = self._file_n
        same = (
            n > 0
            and S >= n
            and self._last_ts is not None
            and block.timestamps_ns.shape[1] == len(self._last_ts)
            and np.array_equal(block.timestamps_ns[n - 1], self._last_ts)
        )
        if S < 2 or (same and S == n):
            return [], []
        self.parts += 1
        self._file_n = S
        self._last_ts = np.array(block.timestamps_ns[S - 1])
        if same:
            return [block.slice(n, S)], []
        msgs = [] if n == 0 else [f"{self.path.name} was replaced (its first samples changed): new baseline"]
        new = block.slice(0, S)
        new.new_baseline = n > 0
        return [new], msgs


def _tool_capture(path: Path) -> str | None:
    """The format (``capture.formats``) of another tool's capture at ``path`` — a perf stat file, a scrape
    file, or a folder of scrapes and no collector parts — which --follow does not read (it waited
    silently on a folder of scrapes, its health saying "starting"); None for the collector format or an
    empty folder (its parts are still to come)."""
    from perfonto.capture.formats import detect

    try:
        if path.is_file():
            fmt = detect(path)
            return None if fmt == "collector" else fmt
        files = sorted(e for e in path.iterdir() if e.is_file() and not e.name.startswith((".", "_")))
    except OSError:
        return None  # the poll names what it cannot read
    if any(f.suffix in (".parquet", ".arrow", ".csv") for f in files):
        return None
    for f in files[:8]:
        fmt = detect(f)
        if fmt != "collector":
            return fmt
    return None


class FollowSource:
    """A ``Follower`` as a live source for ``perfonto serve --follow``: ``blocks(stop)`` polls every
    ``poll_s`` seconds and yields new blocks until ``stop`` is set; ``status()`` says how many parts
    were read and skipped, and how long since the latest one (``lag_s``). Messages (skipped parts,
    new baselines) go to ``log``."""

    def __init__(
        self,
        follower: Follower,
        poll_s: float = 0.5,
        log: Callable[[str], None] = lambda s: None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.follower, self.poll_s, self.log, self.clock = follower, poll_s, log, clock
        self._last_read: float | None = None
        self.finished = False

    def start(self) -> None:
        """Nothing to start: the first poll reads what is already there."""

    def blocks(self, stop) -> Iterator[SampleBlock]:
        """Yield new samples as parts appear, until ``stop`` (a ``threading.Event``) is set."""
        while not stop.is_set():
            blocks, msgs = self.follower.poll()
            for m in msgs:
                self.log(m)
            for b in blocks:
                self._last_read = self.clock()
                yield b
            if not blocks:
                stop.wait(self.poll_s)

    def close(self) -> None:
        """Nothing to release."""

    def status(self) -> dict:
        """``kind``, ``parts`` read, ``errors`` (parts skipped), ``lag_s`` since the latest part."""
        f = self.follower
        return {
            "kind": "follow",
            "path": str(f.path),
            "parts": f.parts,
            "errors": f.skipped,
            "error": None,
            "lag_s": None if self._last_read is None else self.clock() - self._last_read,
            "finished": False,
        }
