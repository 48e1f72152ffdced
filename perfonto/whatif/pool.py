"""Independent pieces of a study (sweep points, coverage runs), computed in this process or over a
pool of worker processes (``concurrent.futures.ProcessPoolExecutor``), with progress as they come in."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, Callable, Sequence


def workers(jobs: int | None, n: int) -> int:
    """Worker processes for ``n`` pieces: ``jobs`` (default: the cores), at most ``n``, at least 1."""
    return max(1, min(jobs or os.cpu_count() or 1, n))


def fill(
    out: list,
    todo: Sequence[int],
    here: Callable[[int], Any],
    there: Callable[[int], tuple],
    *,
    jobs: int,
    total: int,
    done: int = 0,
    progress: Callable[[int, int], Any] | None = None,
) -> list:
    """Set ``out[i]`` for every index ``i`` of ``todo`` and return ``out``. With one job each is
    ``here(i)``, in order, in this process; with more, ``there(i)`` gives ``(function, *args)`` that
    a worker process calls (``jobs`` of them; results land as they finish). After each result,
    ``progress(done, total)``, ``done`` counting on from the given number."""
    if jobs == 1:
        for i in todo:
            out[i] = here(i)
            done += 1
            if progress:
                progress(done, total)
        return out
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futs = {pool.submit(*there(i)): i for i in todo}
        for fut in as_completed(futs):
            out[futs[fut]] = fut.result()
            done += 1
            if progress:
                progress(done, total)
    return out


__all__ = ["fill", "workers"]
