"""Read other tools' catalog files (JSON, YAML) so that no input can crash or exhaust the importer.

Every importer reads its file here: the path must be a regular file of bounded size (a device such
as ``/dev/full`` is refused instead of read forever — ``ontology.files``), JSON nested too deeply
(``[[[[…]]]]``, which makes Python's decoder raise ``RecursionError``) and YAML alias bombs are
refused with a message, and the decoded document may nest at most ``MAX_DEPTH`` levels, so the
recursive walks of the importers never meet a structure deeper than they can handle. Every failure
is a ``ValueError`` naming the file (the importer reports it and exits 1).
"""

from __future__ import annotations

import json
from pathlib import Path

from perfonto.ontology.files import FileReadError, read_text
from perfonto.ontology.yaml_source import read_yaml

MAX_DEPTH = 64  # a catalog's structure is a few levels deep


def _depth_ok(doc, limit: int = MAX_DEPTH) -> bool:
    """True when ``doc`` (decoded JSON/YAML) nests at most ``limit`` containers deep (iterative)."""
    stack = [(doc, 1)]
    while stack:
        node, d = stack.pop()
        if isinstance(node, (dict, list)):
            if d > limit:
                return False
            items = node.values() if isinstance(node, dict) else node
            stack.extend((v, d + 1) for v in items if isinstance(v, (dict, list)))
    return True


def load_json(path: str | Path, what: str = "catalog file"):
    """The JSON document of ``path``.

    Raises:
        ValueError: unreadable path (see ``ontology.files.read_text``), malformed JSON (with line and
        column), a document nested more than ``MAX_DEPTH`` levels, or a number JSON cannot hold.
    """
    try:
        text = read_text(path, what)
    except FileReadError as exc:
        raise ValueError(str(exc)) from None
    try:
        doc = json.loads(text)
    except RecursionError:
        raise ValueError(
            f"{path}: the JSON is nested too deeply to read (more than {MAX_DEPTH} levels is not a catalog)"
        ) from None
    except json.JSONDecodeError as exc:
        msg = exc.msg[: -len(" at")] + " here" if exc.msg.endswith(" at") else exc.msg  # json's "… starting at"
        raise ValueError(
            f"{path}:{exc.lineno}:{exc.colno}: malformed JSON: {msg} (is the file complete? fix it or copy it again)"
        ) from None
    except ValueError as exc:  # an integer past Python's digit limit
        raise ValueError(f"{path}: malformed JSON: {exc}") from None
    if not _depth_ok(doc):
        raise ValueError(f"{path}: the JSON is nested more than {MAX_DEPTH} levels deep; it is not a catalog")
    return doc


def load_yaml(path: str | Path, what: str = "catalog file"):
    """The YAML document of ``path``, read by perfonto's guarded reader (``ontology.yaml_source``:
    alias bombs, deep nesting, duplicate keys and huge integers are refused).

    Raises:
        ValueError: the first problem found, with its line and column.
    """
    src = read_yaml(path)
    if src.diagnostics:
        d = src.diagnostics[0]
        raise ValueError(f"{d.span}: {d.message}" + (f" ({d.hint})" if d.hint else ""))
    return src.data


__all__ = ["MAX_DEPTH", "load_json", "load_yaml"]
