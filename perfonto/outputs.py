"""Output folders that are either complete or absent.

A command that writes a folder (``run``, ``analyze``, ``codegen``, ``docs``, ``import``, …) writes into
a hidden temporary sibling (``.NAME.tmp-RUNID``) and renames it into place only when it succeeded, so
an interrupted or failed command leaves no folder that a later command would take for a result.
Every folder perfonto completes holds a manifest, ``perfonto.json`` (run id, command line, time,
perfonto version, the inputs it read); a non-empty folder without one is not perfonto's and is
refused unless ``--force``. A lock file beside the folder (``.NAME.lock``, created exclusively,
holding the writer's pid) makes a second concurrent writer fail at once with a clear message; a
lock left by a process that no longer exists is taken over.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

MANIFEST = "perfonto.json"


class OutputError(Exception):
    """The output folder cannot be written (the message says why and what to do)."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lock(path: Path) -> Path:
    lock = path.parent / f".{path.name}.lock"
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                pid = int(lock.read_text().strip() or 0)
            except (OSError, ValueError):
                pid = 0
            if pid and pid != os.getpid() and _alive(pid):
                raise OutputError(f"{path}: another perfonto (pid {pid}) is writing this folder; wait for it to finish, "
                                  f"or choose another --out") from None
            try:
                lock.unlink()  # a stale lock: its writer is gone
            except FileNotFoundError:
                pass
            continue
        except OSError as exc:
            raise OutputError(f"{path.parent}: cannot write here ({exc.strerror}); choose another --out") from None
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return lock
    raise OutputError(f"{path}: cannot take the lock {lock}; remove it if no perfonto is running")


def check_target(path: str | Path, force: bool = False) -> Path:
    """``path`` as an output folder: absent, empty, or written by perfonto (or ``force``).

    Raises:
        OutputError: a file, or a non-empty folder without perfonto's manifest (without ``force``),
            or a name the file system cannot hold.
    """
    p = Path(path)
    try:
        if p.exists() and not p.is_dir():
            raise OutputError(f"{p}: is a file, not a folder; give a folder for --out")
        if p.is_dir() and any(p.iterdir()) and not (p / MANIFEST).is_file() and not force:
            raise OutputError(f"{p}: the folder is not empty and perfonto did not write it (no {MANIFEST}); "
                              "choose another --out, or add --force to replace it")
        if len(p.name.encode()) > 200:
            raise OutputError(f"{str(p)[:80]}…: the folder name is too long for the file system; choose a shorter --out")
    except OSError as exc:
        raise OutputError(f"{str(p)[:200]}: cannot use this path ({exc.strerror}); choose another --out") from None
    return p


@contextmanager
def output_folder(path: str | Path, *, command: list[str] | None = None, force: bool = False, inputs: dict | None = None):
    """Write a folder atomically: yields a temporary sibling to write into, which becomes ``path``
    (with its manifest) when the block ends without an exception; on an exception, a Ctrl-C or a
    SIGTERM the temporary folder is removed and ``path`` is left as it was.

    ``inputs``: name → path of what the command read (recorded in the manifest; ``perfonto analyze``
    records its capture so that ``align``/``timeline`` can find the trace and sync reads).

    Raises:
        OutputError: see ``check_target``; the folder is being written by another process; the
            parent cannot be created.
    """
    p = check_target(path, force)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{p.parent}: cannot create the folder ({exc.strerror}); choose another --out") from None
    lock = _lock(p)
    run_id = uuid.uuid4().hex[:12]
    tmp = p.parent / f".{p.name}.tmp-{run_id}"
    old_term = signal.getsignal(signal.SIGTERM)

    terminated = []

    def on_term(signum, frame):  # make SIGTERM clean up like Ctrl-C
        terminated.append(signum)
        raise KeyboardInterrupt

    try:
        if threading_main():
            signal.signal(signal.SIGTERM, on_term)
        tmp.mkdir()
        manifest = {"perfonto": _version(), "run_id": run_id, "command": list(command if command is not None else sys.argv),
                    "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "inputs": dict(inputs or {})}
        yield tmp
        if terminated:  # the KeyboardInterrupt was swallowed (raised inside a finalizer or callback): still stop
            raise KeyboardInterrupt
        manifest["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
        check_target(p, force)  # still ours to replace
        old = None
        if p.exists():
            old = p.parent / f".{p.name}.old-{run_id}"
            p.rename(old)
        tmp.rename(p)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if threading_main():
            signal.signal(signal.SIGTERM, old_term)
        try:
            lock.unlink()
        except FileNotFoundError:
            pass


def write_file(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (a temporary file beside it, then a rename): a reader sees
    the old file or the new one, never half of one.

    Raises:
        OutputError: the folder cannot be created or written, or ``path`` is a folder.
    """
    p = Path(path)
    tmp = p.parent / f".{p.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        if p.is_dir():
            raise OutputError(f"{p}: is a folder; give a file name")
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, p)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OutputError(f"{str(p)[:200]}: cannot write ({exc.strerror or exc}); choose another place") from None
    return p


def relocate(value, tmp: Path, final: Path):
    """Paths under ``tmp`` (strings in nested dicts/lists) rewritten to where they will be, under ``final``."""
    t = str(tmp)
    if isinstance(value, str):
        return str(final) + value[len(t):] if value == t or value.startswith(t + os.sep) else value
    if isinstance(value, dict):
        return {k: relocate(v, tmp, final) for k, v in value.items()}
    if isinstance(value, list):
        return [relocate(v, tmp, final) for v in value]
    return value


def threading_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _version() -> str:
    from perfonto import __version__

    return __version__
