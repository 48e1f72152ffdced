"""Test-only helpers for the import equivalence tests: random positive windows for a generation, the
real-catalogs folder (skipping when absent), and the comparison of two values with NaN equal to null."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from perfonto.metrics.interpreter import evaluate
from perfonto.metrics.windows import Windows

# ../shared/data next to the checkout; PERFONTO_SHARED_DATA points elsewhere (a git worktree lives deeper)
REAL = (
    Path(os.environ.get("PERFONTO_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
    / "real-catalogs"
)


def import_real(kind: str, name: str, out: Path, **kw):
    """``perfonto import KIND`` of the real catalog ``name`` (skipped when absent) into ``out``: (the
    file, the import report)."""
    from perfonto.interop import import_file

    path = real_file(name)
    return path, import_file(kind, path, out, **kw)


def real_file(name: str) -> Path:
    """A file of ``../shared/data/real-catalogs``; the test is skipped (and says so) when it is absent."""
    p = REAL / name
    if not p.is_file():
        pytest.skip(
            f"real catalog {name} not found in {REAL} (the shared data folder is not present; "
            f"these files are read in place, never copied into the project)"
        )
    return p


def random_windows(gen, trials: int = 12, seed: int = 0) -> Windows:
    """One window per trial, one chip: every signal (and packed field) a random positive value in
    [1, 10^5) (log-uniform), per instance; intervals in [0.05, 2) s."""
    rng = np.random.default_rng(seed)
    values = {}
    for name, s in list(gen.signals.items()) + list(getattr(gen, "fields", {}).items()):
        shape = (trials, 1) + tuple(size for _, size in s.axes)
        values[name] = np.exp(rng.uniform(0.0, np.log(1e5), size=shape))
    interval = rng.uniform(0.05, 2.0, size=(trials, 1))
    return Windows(interval, values)


def perfonto_values(graph, w: Windows) -> dict[str, np.ndarray]:
    return evaluate(graph, w)


def same(a, b, rtol: float = 1e-9) -> bool:
    """Equal within ``rtol`` (NaN — perfonto's null — equals NaN)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    a, b = np.broadcast_arrays(a, b)
    both_nan = np.isnan(a) & np.isnan(b)
    with np.errstate(invalid="ignore"):
        close = np.isclose(a, b, rtol=rtol, atol=1e-12 * np.maximum(1.0, np.nan_to_num(np.abs(b))))
    return bool(np.all(both_nan | close))
