"""The header comment of a generated SQL query: ``--`` lines that no text of the user's can end.

The header names the command that regenerates the query, with the user's options (paths as given), so a
path may hold anything a file name can: a line break would end the ``--`` comment and put the rest of the
path in the query as SQL, and ``*/`` or ``/*`` would read as the end or start of a block comment to a
tool that splits scripts on them. ``comment_safe_shell`` rewrites a shell command line as one printable
line with neither, which a POSIX shell with ANSI-C quoting (bash, zsh, ksh) still reads as the same words:
a character that is not printable is written ``$'\\n'`` (``$'\\xff'`` for a byte that is not UTF-8, as
Python holds it: a lone surrogate), and ``*/``/``/*`` are split by an empty quoted string (``'*''/'``).
"""

from __future__ import annotations

#: The start of the header line that says how to regenerate the query (the options follow, then "`.").
REGENERATE = "-- Do not edit: regenerate with `perfonto codegen --target sql"

_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _ansi_c(c: str) -> str:
    """The character ``c`` as an escape inside ``$'...'``."""
    if c in _NAMED:
        return _NAMED[c]
    n = ord(c)
    if 0xDC80 <= n <= 0xDCFF:  # a byte that is not UTF-8, as os.fsdecode holds it: the byte itself
        return f"\\x{n - 0xDC00:02x}"
    if n < 0x80:
        return f"\\x{n:02x}"
    return f"\\u{n:04x}" if n <= 0xFFFF else f"\\U{n:08x}"


def comment_safe_shell(words: str) -> str:
    """``words`` (a command line as ``shlex.quote``/``shlex.join`` write it, or any POSIX-quoted one) as the
    same words on one printable line without ``*/`` or ``/*``: each character that is not printable becomes
    an ANSI-C escape (``$'\\n'``), closing and reopening the quote it stands in, and an empty quoted string
    goes between ``*`` and ``/``. Text that needs neither is returned as it is."""
    if words.isprintable() and "*/" not in words and "/*" not in words:
        return words
    out: list[str] = []
    quote = ""  # the quote the next character stands in: '', "'" or '"'
    escaped = False  # the previous character was a backslash outside single quotes
    prev = ""
    for c in words:
        if not c.isprintable():
            out.append(f"{quote}$'{_ansi_c(c)}'{quote}")  # close the quote, the escape, reopen it
            escaped, prev = False, ""
            continue
        if {prev, c} == {"*", "/"} and not escaped:
            out.append(quote * 2 if quote else "''")  # an empty string between: the same word, no `*/`
        out.append(c)
        if escaped:
            escaped = False
        elif c == "\\" and quote != "'":
            escaped = True
        elif quote == "" and c in "'\"":
            quote = c
        elif c == quote:
            quote = ""
        prev = c
    return "".join(out)


def comment_note(note: str) -> str | None:
    """A note (prose) as the text of one header comment line: None when it is not one printable line (it
    is left out rather than let text out of the comment); ``*/`` and ``/*`` are spaced (``* /``)."""
    if not note.isprintable():
        return None
    return note.replace("*/", "* /").replace("/*", "/ *")


def regenerate_line(flags: str) -> str:
    """The header line giving the command that regenerates the query: ``perfonto codegen --target sql``
    and ``flags`` (shell words, each as ``shlex.quote`` gives it), made safe by ``comment_safe_shell``."""
    return f"{REGENERATE}{comment_safe_shell(flags)}`.\n"


def with_command_options(text: str, options: str) -> str:
    """The generated query ``text`` whose regenerate line gives ``options`` (shell words, as
    ``shlex.quote`` gives them: the command's ``--out``, ``--catalog``, … that the emitter does not know)
    before the query's own options; ``text`` as it is when it has no such line."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if not line.startswith("--"):
            break  # the header is over
        if line.startswith(REGENERATE):
            lines[i] = REGENERATE + comment_safe_shell(options) + line[len(REGENERATE) :]
            return "\n".join(lines)
    return text
