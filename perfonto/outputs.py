"""Output folders that are either complete or absent.

A command that writes a folder (``run``, ``analyze``, ``codegen``, ``docs``, ``import``, …) writes into
a hidden temporary sibling (``.NAME.tmp-RUNID``) and renames it into place only when it succeeded, so
an interrupted or failed command leaves no folder that a later command would take for a result.
Every folder perfonto completes holds a manifest, ``perfonto.json`` (run id, command line, time,
perfonto version, the inputs it read); a non-empty folder without one is not perfonto's and is
refused unless ``--force``. A lock file beside the folder (``.NAME.lock``, created exclusively,
holding the writer's pid) makes a second concurrent writer fail at once with a clear message; a
lock left by a process that no longer exists is taken over. Single files (atomic replacement, the
record of what perfonto wrote, the refusal to replace a user's file) are ``perfonto.output_files``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
import uuid
from typing import NoReturn
from contextlib import contextmanager
from pathlib import Path
from perfonto.output_files import (  # noqa: F401 - re-exported: commands import them from here
    GENERATED_MARKS,
    OutputError,
    _full,
    _generated,
    _remember,
    _remembered,
    _unlink,
    atomic_path,
    check_file_target,
    remember_output,
    write_file,
)

MANIFEST = "perfonto.json"


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
                raise OutputError(
                    f"{path}: another perfonto (pid {pid}) is writing this folder; wait for it to finish, "
                    f"or choose another --out"
                ) from None
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
        if p.is_dir() and any(p.iterdir()) and _manifest(p) is None and not force:
            raise OutputError(
                f"{p}: the folder is not empty and perfonto did not write it (no {MANIFEST}); "
                "choose another --out, or add --force to replace it"
            )
        if len(p.name.encode()) > 200:
            raise OutputError(
                f"{str(p)[:80]}…: the folder name is too long for the file system; choose a shorter --out"
            )
    except OSError as exc:
        raise OutputError(f"{str(p)[:200]}: cannot use this path ({exc.strerror}); choose another --out") from None
    return p


def _under(a: str, b: str) -> bool:
    """Real path ``a`` equals ``b`` or lies inside it."""
    return a == b or a.startswith(b.rstrip(os.sep) + os.sep)


def check_inputs(p: Path, inputs: dict | None) -> None:
    """Refuse an output that equals, contains or lies inside one of the command's inputs: replacing it
    would delete the input, or the next run would read its own outputs as input.

    Raises:
        OutputError: naming the input and what to do.
    """
    out = os.path.realpath(p)
    for name, where in (inputs or {}).items():
        if not where:
            continue
        src = os.path.realpath(where)
        if _under(src, out) or (os.path.isdir(src) and _under(out, src)):
            how = "is" if src == out else ("holds" if _under(src, out) else "lies inside")
            raise OutputError(
                f"{p}: the output folder {how} the input {where} ({name}); writing there would replace or "
                "mix with the input: choose an --out outside it"
            )


def _files(root: Path) -> set[str]:
    """Relative paths of the files (and symbolic links, not followed) under ``root``."""
    out = set()
    for d, dirs, files in os.walk(root):
        rel = Path(d).relative_to(root)
        out |= {str(rel / f) for f in files}
        out |= {str(rel / x) for x in dirs if os.path.islink(os.path.join(d, x))}
    return {f.removeprefix("./") for f in out}


def _manifest(p: Path) -> dict | None:
    """The manifest of folder ``p`` when it is perfonto's (a JSON object with its ``perfonto`` version
    and ``run_id``); None for none, or a ``perfonto.json`` someone else wrote."""
    try:
        doc = json.loads((p / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("run_id"), str) and "perfonto" in doc else None


def _written_before(p: Path, now: set[str] | None = None) -> set[str]:
    """What the manifest of the folder ``p`` says perfonto wrote: nothing without perfonto's manifest;
    with one from before manifests listed their files, the names perfonto writes ``now``."""
    doc = _manifest(p)
    if doc is None:
        return set()
    files = doc.get("files")
    return {str(f) for f in files} if isinstance(files, list) else set(now or ())


def _dirs(root: Path) -> list[str]:
    """Relative paths of the real folders under ``root`` (symbolic links to folders are files here)."""
    out = []
    for d, dirs, _ in os.walk(root):
        rel = Path(d).relative_to(root)
        out += [str(rel / x).removeprefix("./") for x in dirs if not os.path.islink(os.path.join(d, x))]
    return out


#: the list of files ``_carry_user_files`` moved into the new folder, so that a failure moves them back
CARRIED = ".perfonto-carried.json"


def _carry_user_files(p: Path, tmp: Path, ours_kept: set[str] = frozenset(), generated_ok: bool = False) -> list[str]:
    """Move every file of the old folder ``p`` that perfonto did not write into the new folder ``tmp``,
    at the same relative path (folders it creates take the old folders' permissions; a user's empty
    folders are kept too), so that replacing the folder keeps them; returns their relative paths.

    Raises:
        OutputError: a user's file has the name of one of the new outputs, or of a folder of them
            (nothing is moved).
    """
    if not p.is_dir():
        return []
    new = _files(tmp)
    ours = _written_before(p, new) - set(ours_kept)  # perfonto's earlier files kept are carried like a user's
    user = sorted(_files(p) - ours - {MANIFEST})
    if _manifest(p) is None and (p / MANIFEST).exists() and MANIFEST not in user:
        user.append(MANIFEST)  # someone else's perfonto.json: theirs, so it must not be replaced silently
    if generated_ok and _manifest(p) is None:  # no manifest says what is perfonto's: a generated file the new
        # output replaces is not a user's (codegen into the repository's schemas/)
        user = [f for f in user if not (f in new and f != MANIFEST and _generated(p / f))]
    _refuse_clash(p, user, new, set(_dirs(tmp)))
    (tmp / CARRIED).write_text(json.dumps(user), encoding="utf-8")  # written first: a failure moves them back
    for f in user:
        _make_parents(p, tmp, Path(f).parent)
        os.rename(p / f, tmp / f)
    our_dirs = {str(Path(o).parent) for o in ours}
    for d in _dirs(p):  # a user's folders that are now empty (or were): kept, with their permissions
        if not (tmp / d).exists() and not any(True for _ in (p / d).iterdir()) and d not in our_dirs:
            _make_parents(p, tmp, Path(d))
    return user


def _refuse_clash(p: Path, user: list[str], new: set[str], new_dirs: set[str] = frozenset()) -> None:
    """Refuse a user's file of ``p`` (``user``, relative paths) that has the name of one of the new outputs
    (``new``), of a folder of them, or of something inside one (an output where the user has a folder).

    Raises:
        OutputError: naming the first such file and what to do."""
    dirs = {str(Path(n).parent) for n in new} | set(new_dirs)
    clash = [f for f in user if f in new or f in dirs or any(f.startswith(n + os.sep) for n in new)]
    if clash:
        raise OutputError(
            f"{p / clash[0]}: perfonto did not write this file and its new output has the same name; "
            "move the file away, or choose another --out"
        )


def check_expected(p: Path, expected) -> None:
    """Before any work: refuse a file of the existing folder ``p`` that perfonto did not write (by its
    manifest) and that has the name of one of the outputs the command will write (``expected``, relative
    paths, e.g. ``report.json``, ``docs/sohu.md``), so that a ``--force`` run is refused before it
    emulates and evaluates rather than after (the same check runs again when the folder is committed).

    Raises:
        OutputError: as ``_carry_user_files``."""
    new = {str(e) for e in expected}
    if not new or not p.is_dir():
        return
    user = sorted(_files(p) - _written_before(p, new) - {MANIFEST})
    _refuse_clash(p, user, new)


def _make_parents(src_root: Path, dst_root: Path, rel: Path) -> None:
    """Create ``dst_root / rel`` level by level, each new level with the mode of ``src_root``'s."""
    cur_src, cur_dst = src_root, dst_root
    for part in rel.parts:
        if part in ("", "."):
            continue
        cur_src, cur_dst = cur_src / part, cur_dst / part
        if not cur_dst.exists():
            cur_dst.mkdir()
            try:
                shutil.copymode(cur_src, cur_dst)
            except OSError:
                pass


@contextmanager
def output_folder(
    path: str | Path,
    *,
    command: list[str] | None = None,
    force: bool = False,
    inputs: dict | None = None,
    accumulate: bool = False,
    expected=(),
):
    """Write a folder atomically: yields a temporary sibling to write into, which becomes ``path``
    (with its manifest) when the block ends without an exception; on an exception, a Ctrl-C or a
    SIGTERM the temporary folder is removed and ``path`` is left as it was.

    What perfonto wrote is listed in the manifest (``files``); replacing a folder deletes only those:
    any other file in it (a user's notes, or everything in a non-empty folder taken with ``force``) is
    moved into the new folder at the same place. ``path`` given as a symbolic link is written where the
    link points, and locked by that real path.

    ``inputs``: name → path of what the command read (recorded in the manifest; ``perfonto analyze``
    records its capture so that ``align``/``timeline`` can find the trace and sync reads); an output
    folder that equals, holds or lies inside an input is refused.

    ``accumulate``: what perfonto wrote into the folder before and this command does not write again is
    kept (and stays listed as perfonto's): ``codegen`` of several targets, or ``import`` of several
    catalogs, into one folder, each replacing only its own files; and a file of the new output's name that
    perfonto generated (``GENERATED_MARKS``) is replaced even where no manifest lists it.

    ``expected``: the outputs (relative paths) the command will surely write: a user's file of one of those
    names is refused on entry (``check_expected``), before the block's work, not only when it ends.

    Raises:
        OutputError: see ``check_target`` and ``check_inputs``; the folder is being written by another
            process; the parent cannot be created; a user's file has the name of a new output.
    """
    p = _real_target(path, force, inputs)
    if not accumulate:  # an accumulating command (codegen, import) keeps what the folder held
        _refuse_other_command(p, command, force)
        check_expected(p, expected)
    lock = _lock(p)
    run_id = uuid.uuid4().hex[:12]
    tmp = p.parent / f".{p.name}.tmp-{run_id}"
    old_term = signal.getsignal(signal.SIGTERM)
    old_int = signal.getsignal(signal.SIGINT)

    terminated = []

    def on_term(signum, frame):  # SIGTERM cleans up like Ctrl-C; both are remembered, see below
        terminated.append(signum)
        raise KeyboardInterrupt

    try:
        if threading_main():
            signal.signal(signal.SIGTERM, on_term)
            if old_int is signal.default_int_handler:  # a command's own Ctrl-C handler (serve) stays
                signal.signal(signal.SIGINT, on_term)
        tmp.mkdir()
        manifest = {
            "perfonto": _version(),
            "run_id": run_id,
            "command": list(command if command is not None else sys.argv),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "inputs": dict(inputs or {}),
        }
        yield tmp
        if terminated:  # the KeyboardInterrupt was swallowed (raised inside a finalizer, a callback or a
            # library that catches BaseException): still stop, and never commit an interrupted run's output
            raise KeyboardInterrupt
        _commit(tmp, p, manifest, force, run_id, accumulate)
    except OSError as exc:
        _restore(tmp, p)
        shutil.rmtree(tmp, ignore_errors=True)
        _raise_write_error(exc, tmp, p)
    except BaseException:
        _restore(tmp, p)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if threading_main():
            signal.signal(signal.SIGTERM, old_term)
            if old_int is signal.default_int_handler:
                signal.signal(signal.SIGINT, old_int)
        try:
            lock.unlink()
        except FileNotFoundError:
            pass


def _subcommand(command) -> str | None:
    """The perfonto command of a recorded command line (``["perfonto", "run", …]`` → ``run``; ``perfonto``
    alone runs ``run``), or None when it cannot be told."""
    if not isinstance(command, list) or not command or not all(isinstance(c, str) for c in command):
        return None
    from perfonto.commands import HELP

    words = [c for c in command if not c.startswith("-")]
    known = [w for w in words if w in HELP]  # `findings` records ["findings", RUN]; the API, sys.argv
    if known:
        return known[0]
    return "run" if len(words) == 1 and Path(words[0]).name == "perfonto" else None


def _refuse_other_command(p: Path, command: list[str] | None, force: bool) -> None:
    """Refuse to replace a folder another perfonto command wrote, unless ``force``: its manifest lists that
    command's outputs, which replacing the folder deletes (a breaker's `docs --out RUN` deleted the run's
    counters and report). ``codegen`` and ``import`` add to a folder and keep what it held (its files and
    recorded inputs), so they are not refused.

    Raises:
        OutputError: naming the folder, the command that wrote it and what to do."""
    if force or command is None or not p.is_dir():
        return
    theirs, mine = _subcommand((_manifest(p) or {}).get("command")), _subcommand(list(command))
    if theirs and mine and theirs != mine:
        raise OutputError(
            f"{p}: holds the output of `perfonto {theirs}`; writing `perfonto {mine}`'s there would replace or "
            "claim it: choose another --out, or give --force"
        )


def _real_target(path: str | Path, force: bool, inputs: dict | None) -> Path:
    """``path`` as the real folder to write (its parent created, links resolved: one lock per real folder,
    whichever link led here), after ``check_inputs`` and ``check_target``.

    Raises:
        OutputError: the root folder, an input, a target ``check_target`` refuses, a parent that cannot be made.
    """
    p = Path(os.path.abspath(path))  # `out/..`, `new/..`: the folder they name, never a temporary inside it
    if p.name in ("", ".", ".."):
        raise OutputError(f"{path}: names the root folder; choose another --out")
    check_inputs(p, inputs)
    p = check_target(p, force)
    if p.is_symlink():  # after check_target: a name the file system refuses is reported there
        p = Path(os.path.realpath(p))
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{p.parent}: cannot create the folder ({exc.strerror}); choose another --out") from None
    return Path(os.path.realpath(p.parent)) / p.name


def _commit(tmp: Path, p: Path, manifest: dict, force: bool, run_id: str, accumulate: bool = False) -> None:
    """The finished ``tmp`` becomes ``p``: its manifest written, the user's files of the old ``p`` carried
    over (with ``accumulate``, perfonto's earlier files that were not written again too), then two renames
    (the old folder aside, the new one in place; the old one back if the second fails) and the old folder
    removed."""
    manifest["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    new = _files(tmp)
    ours_kept = (_written_before(p, new) - new - {MANIFEST}) if accumulate and p.is_dir() else set()
    ours_kept = {f for f in ours_kept if (p / f).exists() or (p / f).is_symlink()}
    before = _manifest(p) if accumulate and p.is_dir() else None
    if before is not None and isinstance(before.get("inputs"), dict):  # what the earlier commands read stays
        manifest["inputs"] = {**before["inputs"], **manifest["inputs"]}
    manifest["files"] = sorted(new | ours_kept | {MANIFEST})
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    check_target(p, force)  # still ours to replace
    if accumulate and p.is_dir() and os.path.ismount(p):  # a mount point cannot be renamed: file by file
        _commit_in_place(tmp, p, new, generated_ok=True)
        return
    kept = [f for f in _carry_user_files(p, tmp, ours_kept, generated_ok=accumulate) if f not in ours_kept]
    old = None
    if p.exists():
        try:
            shutil.copymode(p, tmp)  # the folder keeps its permissions (a private 700 folder stays private)
        except OSError:
            pass
        old = p.parent / f".{p.name}.old-{run_id}"
        p.rename(old)
    try:
        tmp.rename(p)
    except BaseException:  # interrupted or failed between the two renames: the old folder goes back first
        if old is not None and not p.exists():
            old.rename(p)
        raise
    (p / CARRIED).unlink(missing_ok=True)
    _say_kept(p, kept)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _say_kept(p: Path, kept: list[str]) -> None:
    """Say which files of the old folder were kept: the user's, and those another perfonto command wrote
    there (``report --html`` into a run: a new user read them called files "perfonto did not write")."""
    ours = [k for k in kept if _remembered(p / k)]
    theirs = [k for k in kept if k not in ours]
    if theirs:
        print(
            f"perfonto: kept {len(theirs)} file(s) in {p} that perfonto did not write (e.g. {theirs[0]})",
            file=sys.stderr,
        )
    if ours:
        print(
            f"perfonto: kept {len(ours)} file(s) in {p} that another perfonto command wrote there (e.g. {ours[0]}): "
            "they describe what the folder held before; write them again",
            file=sys.stderr,
        )


def _commit_in_place(tmp: Path, p: Path, new: set[str], generated_ok: bool) -> None:
    """``accumulate`` into a folder that cannot be renamed (a mount point): each new file moved into ``p`` on
    its own (each atomically), after checking that none replaces a file perfonto did not write; the manifest
    last. ``tmp`` is removed by the caller.

    Raises:
        OutputError: a user's file has the name of a new output (nothing is moved).
    """
    ours = _written_before(p, new)
    for f in sorted(new - {MANIFEST}):
        dst = p / f
        if (dst.exists() or dst.is_symlink()) and f not in ours and not (generated_ok and _generated(dst)):
            raise OutputError(
                f"{dst}: perfonto did not write this file and its new output has the same name; "
                "move the file away, or choose another --out"
            )
    for f in sorted(new - {MANIFEST}) + [MANIFEST]:
        (p / f).parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp / f, p / f)


def _raise_write_error(exc: OSError, tmp: Path, p: Path) -> NoReturn:
    """Re-raise ``exc``; a failure to write the output (a path in ``tmp``, or a full disk) as an
    ``OutputError`` naming the final path, never the temporary folder."""
    where = str(exc.filename or "")
    if where.startswith(str(tmp)) or (not where and _full(exc)):
        rel = where[len(str(tmp)) :].lstrip(os.sep)
        raise OutputError(
            f"{p}{os.sep + rel if rel else ''}: cannot write ({exc.strerror or exc}); free space or choose "
            "another --out (the previous output, if any, is unchanged)"
        ) from None
    raise exc


def _restore(tmp: Path, p: Path) -> None:
    """After a failure: the files already moved into ``tmp`` (the user's, and with ``accumulate`` perfonto's
    earlier ones: listed in ``CARRIED``) go back to ``p`` before ``tmp`` is removed."""
    if not (tmp / MANIFEST).is_file() or not p.is_dir():
        return
    try:
        carried = {str(f) for f in json.loads((tmp / CARRIED).read_text(encoding="utf-8"))}
    except (OSError, ValueError, TypeError):
        carried = set()
    ours = _written_before(tmp) - carried
    for f in sorted((_files(tmp) - ours - {CARRIED}) | {c for c in carried if (tmp / c).exists()}):
        dst = p / f
        if not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.rename(tmp / f, dst)


#: the manifest's name for the run or fleet folder given as an analysis's input: an output folder may not lie
#: in it (``check_inputs``), a single file written there later may (``refuse_run_file``)
CAPTURE_FOLDER = "capture folder"

#: the files of a run folder that ``report``, ``timeline``, ``align`` and ``compare-runs`` read (a folder from
#: before manifests listed their files is protected by these names)
RUN_FILES = ("report.json", "metrics.parquet", "counters.parquet", "trace.parquet", "sync.parquet", "ground_truth.json")


def refuse_run_file(
    target: str | Path | list, run_folder: str | Path, option: str, ours: frozenset = frozenset()
) -> None:
    """Refuse a single-file output (``report --html``, ``timeline --out``; a list of them: ``--plots``' pictures,
    the manifest read once) that would replace a file of the perfonto folder ``run_folder`` that its manifest
    lists (the run's own outputs, which this command and the others read), one of ``RUN_FILES``, or an input
    the manifest records; a new file, or any other, is written as asked. ``ours``: names this command writes,
    which it may replace where the manifest lists them (``report --plots RUN`` a second time).

    Raises:
        OutputError: naming the file and what to do.
    """
    root = Path(os.path.realpath(run_folder))
    doc = _manifest(root) or {}
    listed = [f for f in doc.get("files") or [] if isinstance(f, str)] if isinstance(doc.get("files"), list) else []
    given = doc.get("inputs") if isinstance(doc.get("inputs"), dict) else {}
    given = {k: v for k, v in given.items() if k != CAPTURE_FOLDER}  # a page beside the capture is no input's
    inputs = [os.path.realpath(v) for v in given.values() if isinstance(v, str) and v]
    theirs = {os.path.realpath(root / f) for f in listed}  # the manifest's: replaceable only if ``ours``
    fixed = {os.path.realpath(root / f) for f in (*RUN_FILES, MANIFEST)}
    for t in target if isinstance(target, list) else [target]:
        real = os.path.realpath(t)
        mine = os.path.basename(real) in ours  # a file this command wrote there before (report --plots' pictures)
        if real in fixed or (real in theirs and not mine) or any(_under(real, i) for i in inputs):
            raise OutputError(
                f"{t}: is one of the files of the run {run_folder} (its outputs or its input); {option} there "
                "would replace what perfonto reads: choose another file name"
            )


def record_outputs(folder: str | Path, names: list[str]) -> None:
    """Add ``names`` (relative paths a later command wrote into the perfonto folder ``folder``, e.g.
    ``align``'s ``alignment.json``) to its manifest's ``files``, so that replacing the folder replaces
    them too; a folder without a manifest is left as it is."""
    m = Path(folder) / MANIFEST
    try:
        doc = json.loads(m.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(doc, dict) and isinstance(doc.get("files"), list):
        doc["files"] = sorted(set(doc["files"]) | set(names))
        write_file(m, json.dumps(doc, indent=2))


def relocate(value, tmp: Path, final: Path):
    """Paths under ``tmp`` (strings in nested dicts/lists) rewritten to where they will be, under ``final``."""
    t = str(tmp)
    if isinstance(value, str):
        return str(final) + value[len(t) :] if value == t or value.startswith(t + os.sep) else value
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
