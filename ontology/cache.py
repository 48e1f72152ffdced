"""perfonto's on-disk cache: compiled catalogs and generated evaluators (with their compiled kernels),
keyed by the content of everything that made them. The same folder holds the run reports' claim
comparisons (``claims/``) and the what-if commands' points (``whatif/``), each keyed by its own inputs.

Where: ``$PERFONTO_CACHE_DIR`` when set, else the user's cache folder (``platformdirs``:
``~/.cache/perfonto`` on Linux). ``PERFONTO_NO_CACHE=1`` (the CLI's ``--no-cache``) turns it off: every
command then compiles from the files, as a first run does.

Keys are SHA-256 digests of the bytes of every input file (the catalog's YAML and metric files, the
shipped catalogs and units), of perfonto's version and of the source of the layers that turn those
files into the cached object — so an edited catalog file, a new perfonto or a changed compiler is a
new key, never a stale hit. Entries are written atomically (a temporary file renamed into place) and
read defensively: an entry that cannot be read is a miss, never an error. Nothing outside the cache
folder is written; nothing in it that perfonto did not write is read as an entry (names are digests).
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import tempfile
from pathlib import Path
from typing import Iterable

CACHE_ENV = "PERFONTO_CACHE_DIR"
NO_CACHE_ENV = "PERFONTO_NO_CACHE"


def enabled() -> bool:
    """Is the cache on (``PERFONTO_NO_CACHE`` unset, empty or ``0``)?"""
    return os.environ.get(NO_CACHE_ENV, "") in ("", "0")


def root() -> Path:
    """The cache folder (not created here)."""
    given = os.environ.get(CACHE_ENV)
    if given:
        return Path(given).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("perfonto"))


def digest(parts: Iterable[bytes | str]) -> str:
    """SHA-256 hex digest of ``parts`` (each length-prefixed, so that no two lists collide)."""
    h = hashlib.sha256()
    for p in parts:
        b = p.encode("utf-8", "surrogatepass") if isinstance(p, str) else p
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def file_parts(paths: Iterable[Path]) -> list[bytes | str]:
    """Each path and its bytes, for ``digest`` (an unreadable file gives its error text: the key still
    changes when it becomes readable)."""
    from .files import FileReadError, read_bytes

    out: list[bytes | str] = []
    for p in paths:
        out.append(str(p))
        try:  # a regular file only, within the size limit: a device or pipe in a catalog folder never blocks here
            out.append(read_bytes(p, "catalog file"))
        except FileReadError as exc:
            out.append(f"unreadable: {exc}")
    return out


@functools.lru_cache(maxsize=8)
def code_digest(*packages: str) -> str:
    """Digest of perfonto's version and the source files (``*.py``, ``*.lark``, ``*.txt``) of the
    given perfonto packages (``"ontology"``, ``"metrics"`` …): a cache entry made by other code is
    never used."""
    import importlib
    from importlib import metadata

    try:
        version = metadata.version("perfonto")
    except metadata.PackageNotFoundError:  # a checkout that is not installed: the source digest below decides
        version = "unknown"
    parts: list[bytes | str] = [version]
    for name in packages:
        mod = importlib.import_module(f"perfonto.{name}")
        assert mod.__file__ is not None, "perfonto's packages are regular packages (an __init__.py)"
        folder = Path(mod.__file__).parent
        files = sorted(p for p in folder.iterdir() if p.suffix in (".py", ".lark", ".txt"))
        parts.append(name)
        parts += file_parts(files)
    return digest(parts)


def entry(kind: str, key: str, suffix: str = "") -> Path:
    """Path of the entry ``key`` of kind ``kind`` (a sub-folder name)."""
    return root() / kind / f"{key}{suffix}"


def write_atomic(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` through a temporary file in the same folder, renamed into place.
    False when the cache folder cannot be written (the caller goes on without the cache)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return True
    except OSError:
        return False


def load_pickle(path: Path, loads=pickle.loads):
    """The object pickled at ``path``, or None when there is none or it cannot be read."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        return loads(data)
    except Exception:  # noqa: BLE001 - a damaged or foreign entry is a miss
        return None


__all__ = [
    "CACHE_ENV",
    "NO_CACHE_ENV",
    "code_digest",
    "digest",
    "enabled",
    "entry",
    "file_parts",
    "load_pickle",
    "root",
    "write_atomic",
]
