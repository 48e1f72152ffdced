"""Compiled catalogs in perfonto's cache (``ontology.cache``), so that a command does not parse and
type-check the catalog files again when nothing changed.

The key is the digest of: the command's choice (catalog folder, generation, library on or off), the
bytes of every file the compile can read — the folder's ``*.yaml``/``*.yml`` and ``*.metrics`` files,
the shipped generations and metric library, the units file — and the source of the layers that
compile them (``ontology``, ``dsl``, ``metrics``) with perfonto's version. The entry is the pickled
``Catalog`` (pint units and registries stored as text and clock domains: ``ontology.units``), about
170 kB for the shipped catalog; loading it takes milliseconds where compiling takes about a second.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path

from perfonto.ontology import cache as _cache


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        from perfonto.ontology.units import pickle_reducer  # pint: imported when a catalog is stored, not read

        return pickle_reducer(obj)


def dumps(obj) -> bytes:
    """``obj`` pickled with pint objects stored by ``ontology.units.pickle_reducer``."""
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


def _shipped_files() -> list[Path]:
    from importlib import resources

    out: list[Path] = []
    for pkg, pattern in (
        ("perfonto.ontology", "catalog/*.yaml"),
        ("perfonto.metrics", "library/*.metrics"),
        ("perfonto.metrics", "library/*.findings.yaml"),
    ):
        base = Path(str(resources.files(pkg)))
        out += sorted(base.glob(pattern))
    out.append(Path(str(resources.files("perfonto.ontology").joinpath("units.txt"))))
    return out


def key(catalog_dir, generation, library: bool, instances: dict | None = None) -> str:
    """The cache key of compiling ``catalog_dir`` for ``generation`` (see the module docstring), with the
    sizes a capture gave the ``from_data`` instance axes (``instances``: axis → labels) when given."""
    files = _shipped_files()
    where = "shipped"
    if catalog_dir is not None:
        d = Path(catalog_dir)
        where = str(d.resolve()) if d.exists() else str(d)
        try:
            own = sorted(p for p in d.iterdir() if p.suffix in (".yaml", ".yml", ".metrics"))
        except OSError as exc:
            own = []
            where += f" (unreadable: {exc})"
        files = own + files
    from perfonto.ontology import kinds

    # a kind registered at run time is an input too (options sorted: a frozenset's order changes per process)
    table = repr(sorted((k, repr({**vars(v), "options": sorted(v.options)})) for k, v in kinds.KINDS.items()))
    sized = [repr(sorted((a, tuple(str(x) for x in v)) for a, v in instances.items()))] if instances else []
    return _cache.digest(
        [_cache.code_digest("ontology", "dsl", "metrics"), where, repr(generation), repr(bool(library)), table]
        + sized
        + _cache.file_parts(files)
    )


def cached(catalog_dir, generation, library: bool, use: bool | None, compile_fn, instances: dict | None = None):
    """``compile_fn(catalog_dir, generation, library=library)`` (and ``instances=`` when given: the sizes of
    the ``from_data`` axes), read from the cache when an entry for the same inputs exists, and stored there
    after compiling (``use`` False, or the cache off: compile)."""
    extra = {"instances": instances} if instances else {}
    if use is False or (use is None and not _cache.enabled()):
        return compile_fn(catalog_dir, generation, library=library, **extra)
    path = _cache.entry("catalogs", key(catalog_dir, generation, library, instances), ".pickle")
    hit = _cache.load_pickle(path)
    from .catalog import Catalog

    if isinstance(hit, Catalog):
        hit.from_cache = True  # so that a command does not say it compiled what it read
        return hit
    cat = compile_fn(catalog_dir, generation, library=library, **extra)
    try:
        data = dumps(cat)
    except Exception:  # noqa: BLE001 - an object that does not pickle is compiled every time, not an error
        return cat
    _cache.write_atomic(path, data)
    return cat


def cached_text(catalog_dir, generation, library: bool, what: list[str], make) -> tuple[str, int]:
    """``make()`` — a ``(text, exit status)`` computed from the catalog that ``load_catalog(catalog_dir,
    generation, library=library)`` compiles and from the other generations of the same files (what
    ``perfonto explain`` prints) — read from the cache when the same text was made before, so that a
    command whose catalog is unchanged neither unpickles the catalog nor imports pint and networkx.

    The key is the catalog's (``key``: every file in ``catalog_dir`` and the shipped files, perfonto's
    version and the source of ``ontology``, ``dsl`` and ``metrics``) plus ``what``: the command's own
    inputs (the metric name, options, the digest of the command's source). Only a text with exit status
    0 is stored; the cache off (``PERFONTO_NO_CACHE``) calls ``make()``."""
    if not _cache.enabled():
        return make()
    path = _cache.entry("texts", _cache.digest([key(catalog_dir, generation, library), *what]), ".txt")
    try:
        return path.read_text(encoding="utf-8"), 0
    except (OSError, UnicodeDecodeError):  # not there (or damaged): a miss
        pass
    text, rc = make()
    if rc == 0:
        _cache.write_atomic(path, text.encode("utf-8"))
    return text, rc


__all__ = ["cached", "cached_text", "dumps", "key"]
