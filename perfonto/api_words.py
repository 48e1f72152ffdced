"""Error messages and notes in the Python API's words: the capture readers and the analysis say what to do in
the CLI's options (``give --sample-period``, ``evaluate it with --generation sohu_next``), since most of their
users run ``perfonto analyze``; a caller of ``perfonto.evaluate`` has no such options, so the message it
gets names the keyword argument or the ``load_catalog`` call that does the same.

Only perfonto's own options are rewritten, and only where they stand alone: another tool's flag in a
message (``ncu --metrics``, ``perf stat --append``, ``rocprofv3 --pmc``) is left as it is."""

from __future__ import annotations

import re

from perfonto.ontology.errors import PerfontoError

#: A CLI option of ``perfonto analyze`` → (the values it takes as a regular expression, or None; what a caller
#: of ``perfonto.evaluate`` writes with that value, ``{0}``; what it writes for the option alone). A value
#: is a name (a unit; a generation, ``SHIPPED``: a generation's name) or a placeholder in capitals
#: (``DIR``, ``NAME``, ``MS``).
_API_WORDS: dict[str, tuple[str | None, str, str]] = {
    "--timestamp-unit": (r"ns|us|ms|s|[A-Z]{2,}", "timestamp_unit={0}", "timestamp_unit="),
    "--sample-period": (r"MS|\d(?:[\w.]*\w)?", 'sample_period="{0}"', "sample_period="),
    "--requests": (None, "", "requests="),
    "--trace": (None, "", "trace="),
    "--sync": (None, "", "sync="),
    "--generation": ("SHIPPED|[A-Z]{2,}", "load_catalog(generation={0})", "load_catalog(generation=...)"),
    "--catalog": (r"[A-Z]{2,}", "load_catalog({0})", "load_catalog(path)"),
    "--no-library": (None, "", "load_catalog(..., library=False)"),
}

#: Tools whose own flags a message may quote (``ncu --metrics``): an option right after one is theirs.
_OTHER_TOOLS = ("ncu", "perf", "stat", "rocprofv3", "dcgmi", "dmon", "nvidia-smi", "record", "report")
_PATTERN = re.compile(
    r"(?<![\w-])(?P<option>" + "|".join(re.escape(o) for o in sorted(_API_WORDS, key=len, reverse=True)) + r")"
    r"(?![\w-])(?:=(?P<given>[^\s,;()`'\"]+)|(?P<sep> )(?P<value>[A-Za-z][A-Za-z0-9_]*|\d(?:[\w.]*\w)?)(?![\w-]|\.\w))?"
)


def _replace(match: re.Match, text: str) -> str:
    before = text[: match.start()].rstrip().rsplit(" ", 1)[-1].strip("`(")
    if before in _OTHER_TOOLS:
        return match.group(0)
    option, value, given = match.group("option"), match.group("value"), match.group("given")
    values, with_value, alone = _API_WORDS[option]
    if given is not None:  # `--opt=value`: the value as the keyword's, whatever it is
        if option == "--sample-period":
            return f'sample_period="{given}"'
        if "{0}" in with_value:
            return with_value.format(repr(given))
        return f"{alone}{given!r}" if alone.endswith("=") else alone
    if values == "SHIPPED|[A-Z]{2,}":  # a generation: a shipped one's name (not the sentence's next word)
        from perfonto.ontology.loader import shipped_generations

        # a shipped generation, a tool's (``dcgm_h100``: an underscore or a digit in it) or a placeholder
        values = "|".join([*map(re.escape, shipped_generations()), r"[a-z][a-z0-9]*[_0-9][a-z0-9_]*", "[A-Z]{2,}"])
    if value is not None and values is not None and re.fullmatch(values, value):
        if option == "--sample-period":  # a duration as text the API reads: "2ms"; MS, dmon's -d, in ms
            return with_value.format("Nms" if value == "MS" else value)
        return with_value.format(value if value.isupper() else repr(value))
    return alone + ("" if value is None else " " + value)  # the word after it is the sentence's


def in_api_words(message: str) -> str:
    """``message`` with perfonto's CLI options replaced by the Python API's keyword arguments (the table
    ``_API_WORDS``); an option followed by its keyword (``(--timestamp-unit, timestamp_unit=)``) is dropped
    rather than said twice; a command line quoted in backquotes (`` `perfonto analyze --trace FILE` ``) is
    left as written — it is a command to run, not a keyword."""
    parts = message.split("`")
    for i in range(0, len(parts), 1):
        if i % 2 and parts[i].lstrip().startswith("perfonto "):
            continue
        parts[i] = _rewrite(parts[i])
    return "`".join(parts)


def _rewrite(text: str) -> str:
    for option, (_, _, alone) in _API_WORDS.items():
        if alone.endswith("="):
            text = re.sub(re.escape(option) + r"(?![\w-]), (?=" + re.escape(alone) + ")", "", text)
    return _PATTERN.sub(lambda m: _replace(m, text), text)


def reworded(exc: PerfontoError) -> PerfontoError:
    """``exc`` with its message in the API's words (``in_api_words``), the same object and class, so a
    caller's ``except perfonto.DumpError`` still catches it; an exception whose message is not its
    first argument is returned unchanged."""
    if exc.args and isinstance(exc.args[0], str):
        exc.args = (in_api_words(exc.args[0]), *exc.args[1:])
    return exc


__all__ = ["in_api_words", "reworded"]
