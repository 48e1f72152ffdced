"""Read a user's file (or probe a path) without ever crashing on what the path turns out to be.

Every reader of catalog text — generation YAML, metric files, test vectors, other tools' catalogs —
goes through ``read_bytes``: it refuses what is not a regular file (a folder, a device such as
``/dev/full`` or ``/dev/zero`` that would be read forever, a pipe), a file larger than the limit, and
turns every ``OSError`` (no such file, permission, a name longer than the file system allows —
``ENAMETOOLONG`` —, too many symlinks) into a ``FileReadError`` whose message names the path and what
the system said, never a bare errno. ``is_dir``/``is_file``/``exists`` answer False instead of
raising for such paths (``pathlib`` raises ``ENAMETOOLONG``, for one).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from .errors import PerfontoError

MAX_TEXT_BYTES = 64 * 1024 * 1024  # a catalog file of more than 64 MiB is not a catalog file


class FileReadError(PerfontoError, ValueError):
    """A path that cannot be read as a file; ``str()`` names the path and the reason."""

    def __init__(self, path: str, reason: str, hint: str = ""):
        super().__init__(f"{_short(path)}: {reason}")
        self.path, self.reason, self.hint = str(path), reason, hint
        self.line: int | None = None  # 1-based, for a byte that is not UTF-8
        self.col: int | None = None


def _short(path: str, limit: int = 160) -> str:
    """A path as shown in messages: at most ``limit`` characters (the middle elided)."""
    p = str(path)
    return p if len(p) <= limit else p[: limit // 2] + "…" + p[-limit // 2 :]


def os_reason(exc: OSError) -> str:
    """What the system said, in words (``File name too long``), never ``[Errno 36]``."""
    if exc.errno == errno.ENAMETOOLONG:
        return "the path is longer than the file system allows (File name too long)"
    return exc.strerror or (os.strerror(exc.errno) if exc.errno else str(exc))


def describe_os_error(exc: OSError, path: str | Path | None = None) -> str:
    """``<path>: <reason>`` for an ``OSError`` (the path from the exception when not given)."""
    where = str(path) if path is not None else (exc.filename or "")
    reason = os_reason(exc)
    return f"{_short(where)}: {reason}" if where else reason


def read_bytes(path: str | Path, what: str = "file", limit: int = MAX_TEXT_BYTES) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    Raises:
        FileReadError: the path does not exist or cannot be opened (the system's reason), is a folder,
        a device, a pipe or a socket, or is larger than ``limit`` bytes.
    """
    p = str(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise FileReadError(p, f"cannot open the {what} ({os_reason(exc)})", "check the path") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise FileReadError(p, f"is a folder, not a {what}", f"give the {what} itself")
        if not stat.S_ISREG(st.st_mode):
            raise FileReadError(
                p,
                f"is not a regular file (a device, pipe or socket), so it cannot be read as a {what}",
                f"give the {what} as a file",
            )
        if st.st_size > limit:
            raise FileReadError(
                p, f"is {st.st_size:,} bytes; a {what} is at most {limit:,} bytes", "split it, or check the path"
            )
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > limit:  # the file grew while being read
                raise FileReadError(p, f"is larger than {limit:,} bytes", "split it, or check the path")
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise FileReadError(p, f"cannot read the {what} ({os_reason(exc)})") from None
    finally:
        os.close(fd)


def read_text(path: str | Path, what: str = "file", limit: int = MAX_TEXT_BYTES) -> str:
    """``read_bytes`` decoded as UTF-8 (a BOM is dropped).

    Raises:
        FileReadError: as ``read_bytes``, or the bytes are not UTF-8 (the byte offset is named).
    """
    raw = read_bytes(path, what, limit)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        err = FileReadError(
            str(path),
            f"is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})",
            "save the file as UTF-8",
        )
        before = raw[: exc.start]
        err.line = before.count(b"\n") + 1  # where the byte is, for a diagnostic's line:col
        err.col = exc.start - (before.rfind(b"\n") + 1) + 1
        raise err from None


def _probe(path, test) -> bool:
    try:
        return bool(test(Path(path)))
    except (OSError, ValueError):  # ENAMETOOLONG, ELOOP, EACCES, an embedded NUL
        return False


def is_dir(path: str | Path) -> bool:
    """``Path.is_dir`` that answers False (never raises) for a path the system refuses."""
    return _probe(path, Path.is_dir)


def is_file(path: str | Path) -> bool:
    """``Path.is_file`` that answers False (never raises) for a path the system refuses."""
    return _probe(path, Path.is_file)


def exists(path: str | Path) -> bool:
    """``Path.exists`` that answers False (never raises) for a path the system refuses."""
    return _probe(path, Path.exists)


def check_path(path: str | Path, what: str = "path") -> None:
    """Raise ``FileReadError`` when the system would refuse ``path`` by its name alone (too long, an
    embedded NUL); a path that merely does not exist passes."""
    p = str(path)
    if "\x00" in p:
        raise FileReadError(p.replace("\x00", "\\0"), f"the {what} holds a NUL character")
    try:
        os.stat(p)
    except FileNotFoundError:
        return
    except NotADirectoryError:
        return
    except OSError as exc:
        if exc.errno in (errno.ENAMETOOLONG, errno.ELOOP):
            raise FileReadError(p, f"cannot use this {what} ({os_reason(exc)})", "use a shorter path") from None


def newlines(text: str) -> str:
    """Text with CR-LF and lone CR (classic Mac OS) line ends turned into LF, so that every reader
    counts lines as the tools that show the file do."""
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


__all__ = [
    "FileReadError",
    "MAX_TEXT_BYTES",
    "check_path",
    "describe_os_error",
    "exists",
    "is_dir",
    "is_file",
    "newlines",
    "os_reason",
    "read_bytes",
    "read_text",
]
