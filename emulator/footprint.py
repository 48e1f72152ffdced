"""How much memory an emulation needs before it starts, so that a run that cannot fit is refused at once
with the figures, not after minutes with a ``MemoryError`` (``perfonto run --duration 23h
--sample-period 1us`` asked for 617 GiB for its sample clock alone) or an hour of work the machine's
memory cannot hold (``--duration 23h`` at 1 ms: 662M rows, ~7 TB).

``emulator.run.run`` holds every sample of every chip in memory while it writes the counters: the
sample grid, each chip's device clock and every register's running value, plus the Parquet encoder's
copy. Peak resident memory measured here (``/usr/bin/time -f %M perfonto run --out DIR``, 8 chips of
the shipped Sohu generation, 279 register instances over its signals): 10 s at 1 ms (80,008 rows)
1,402,640 KiB, 40 s (320,008 rows) 4,116,020 KiB — 2,713,380 KiB / 240,000 rows = 11,577 bytes a row =
41.5 bytes per register and row, about five 8-byte copies of each value. ``BYTES_PER_REGISTER_ROW`` rounds
that down to 40 and the fixed part (imports, catalog, scheduler) is not counted, so the estimate errs
low: a run is refused only where it cannot fit.

``emulate --fleet`` writes one such run per host profile and a Parquet part per host: measured here, ``perfonto
emulate --fleet 1000x8 --out DIR`` (1 s at 1 ms: 8,016,000 rows of 279 registers) wrote 3,625,707,320
bytes = 452 bytes a row = 1.62 bytes per register and row; ``DISK_BYTES_PER_REGISTER_ROW`` rounds that
down to 1.5, so a fleet is refused only where its parts cannot fit in the free space of ``--out``'s disk
(``emulate --fleet 100000x8`` asked for ~360 GB and ran on until the disk filled).
"""

from __future__ import annotations

import math
import os

from .knobs import WorkloadError

#: bytes of resident memory per register value of one row (one sample of one chip) at the peak of a run
#: (module docstring: 41.5 measured, rounded down)
BYTES_PER_REGISTER_ROW = 40

#: bytes on disk per register value of one row of an emulated fleet's Parquet parts (module docstring:
#: 1.62 measured, rounded down)
DISK_BYTES_PER_REGISTER_ROW = 1.5


#: (limit, usage) files of the process's cgroup under /sys/fs/cgroup: v2, then v1
CGROUP_FILES = (("memory.max", "memory.current"), ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes"))


def available_memory() -> int | None:
    """Bytes of memory a new allocation can get: the kernel's ``MemAvailable`` (``/proc/meminfo``, Linux),
    or the machine's physical memory (``sysconf``), capped by the process's cgroup limit less what the cgroup
    already uses (``/sys/fs/cgroup/memory.max`` and ``memory.current``, v2; ``memory.limit_in_bytes`` and
    ``memory.usage_in_bytes``, v1: a container is killed at its limit, whatever the host has free); None
    when none is known (nothing is refused)."""
    best = _meminfo_available()
    if best is None:
        try:
            best = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            best = None
    for limit, used in CGROUP_FILES:
        cap = _read_int(f"/sys/fs/cgroup/{limit}")
        if cap is not None and cap < 1 << 60:  # "max" or a v1 "no limit" (about 2^63)
            left = max(0, cap - (_read_int(f"/sys/fs/cgroup/{used}") or 0))
            best = left if best is None else min(best, left)
            break
    return best


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _read_int(path: str) -> int | None:
    """The integer a cgroup file holds; None for ``max``, an absent file or anything else."""
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def rows_of(chips: int, duration_s: float, sample_period_s: float) -> int:
    """Rows an emulation of ``chips`` chips writes: chips × (duration ÷ period + 2 samples: the one at 0 and
    the final one)."""
    return int(chips) * (math.floor(duration_s / sample_period_s) + 2)


def registers_of(gen) -> int:
    """Register values a row of ``gen``'s dump: every instance of every signal."""
    return sum(s.instances for s in gen.signals.values())


def check_run_fits(gen, chips: int, duration_s: float, sample_period_s: float) -> None:
    """``check_fits`` for a run of ``chips`` chips of generation ``gen`` on this machine's available memory."""
    check_fits(chips, registers_of(gen), duration_s, sample_period_s, available_memory())


def check_fits(chips: int, registers: int, duration_s: float, sample_period_s: float, available: int | None) -> None:
    """Refuse an emulation whose samples cannot be held in ``available`` bytes.

    ``chips``: chips emulated together (one host of a fleet); ``registers``: register values a row (every
    instance of every signal); rows = chips × (duration ÷ period + 2 samples: the one at 0 and the
    final one); need = rows × registers × ``BYTES_PER_REGISTER_ROW``.

    Raises:
        WorkloadError: the estimate above ``available``, naming both and what to change.
    """
    if available is None:
        return
    rows = rows_of(chips, duration_s, sample_period_s)
    samples = rows // int(chips)
    need = rows * int(registers) * BYTES_PER_REGISTER_ROW
    if need <= available:
        return
    longest = available / (int(chips) * int(registers) * BYTES_PER_REGISTER_ROW) * sample_period_s
    raise WorkloadError(
        f"{samples:,} samples of {chips} chips × {registers} registers need about {_gb(need)} of memory "
        f"(the emulator holds a run's samples in memory) and {_gb(available)} is available: give a longer "
        f"--sample-period (now {sample_period_s * 1e3:g} ms) or a shorter --duration (at most about "
        f"{_seconds(longest)} at this period), or fewer chips"
    )


def check_disk(rows: int, registers: int, free: int, where: str) -> None:
    """Refuse writing ``rows`` rows of ``registers`` register values where ``free`` bytes are free.

    Raises:
        WorkloadError: the estimate (rows × registers × ``DISK_BYTES_PER_REGISTER_ROW``) above ``free``,
            naming both and ``where``.
    """
    need = rows * registers * DISK_BYTES_PER_REGISTER_ROW
    if need > free:
        raise WorkloadError(
            f"{rows:,} rows of {registers} registers need about {_gb(need)} on disk and {where} has {_gb(free)} "
            f"free: emulate fewer hosts or chips, a shorter --duration or a longer --sample-period"
        )


def _gb(n: float) -> str:
    return f"{n / 1e12:,.1f} TB" if n >= 1e12 else f"{n / 1e9:,.1f} GB" if n >= 1e9 else f"{n / 1e6:,.1f} MB"


def _seconds(s: float) -> str:
    return f"{s / 3600:,.1f} h" if s >= 3600 else f"{s:,.0f} s" if s >= 1 else f"{s * 1e3:,.0f} ms"


__all__ = [
    "BYTES_PER_REGISTER_ROW",
    "DISK_BYTES_PER_REGISTER_ROW",
    "available_memory",
    "check_disk",
    "check_fits",
    "check_run_fits",
    "registers_of",
    "rows_of",
]
