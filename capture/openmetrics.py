"""Prometheus text exposition and OpenMetrics text read as a capture: a file of many scrapes (each
sample with its time stamp, as ``promtool tsdb create-blocks-from openmetrics`` takes them), or a
folder of scrapes, one file each, named by the time of the scrape.

How a scrape is read:

- **Time.** A sample's own time stamp (Prometheus text: ms since the epoch; OpenMetrics: seconds) when
  the exposition has them: the samples of one time stamp are one sample of the capture. A scrape
  without time stamps (what an exporter serves: ``curl -s host:9100/metrics``) must be a file of its own
  in a folder (a ``*.md`` note beside them is skipped), whose name holds the scrape time in seconds since the epoch
  (``scrapes/1764650000.250.prom``: write it with ``date +%s.%N``); the files are read in time order.
- **Mapping.** A signal declares the series it is read from as a selector,
  ``sources: {openmetrics: 'node_cpu_seconds_total{mode="idle"}'}``: the sample name and the labels
  that must match (parsed by ``parse_selector``, a lark grammar). The labels the selector leaves open are the
  chip key: one label whose values are all integers (node_exporter's ``cpu="3"``) is the chip number;
  several, the one whose integer values tell a host's series apart (``cpu``, ``gpu``, …: dcgm-exporter's
  ``gpu="0"`` beside its ``UUID`` and ``modelName``), else the label sets are numbered in order of first
  appearance and listed in a note. The ``instance`` label (or dcgm-exporter's ``Hostname``) is the host.
- **Values.** A counter's samples are running totals (an exporter's ``_total``): floating-point values
  become integer raw counts of the signal's ``scale`` (``node_cpu_seconds_total`` in s read into a signal
  with ``scale: 1.0e-9`` counts ns), rounded; a gauge's too (a ratio read into ``scale: 1.0e-6`` counts
  millionths), as the level it is. A series absent from a
  scrape is null there (the windows it touches are null, reason ``missing sample``); NaN is null too.
  A selector that matches no series in the whole capture leaves its signal out, so the metrics that
  read it are unavailable ("not in the dump: …").
- **GPU model.** The series a selector matches in one scrape must name one GPU model (dcgm-exporter's
  ``modelName``, which picks the generation: ``generation_of``): scrapes of an H100 and an H200 side by side
  are refused, naming the models and their GPUs, since one generation's peaks would be applied to both;
  analyse each model's series apart.

Every problem is a ``DumpError`` naming the file (and line, for a line the exposition parser refuses)
and what to do.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from .dump_io import DumpError
from .formats import export_text
from .instances import axis_of, check_labels
from .openmetrics_models import one_model
from .openmetrics_table import collector_table, series_instances

_GRAMMAR = r"""
    selector: NAME ("{" [matcher ("," matcher)*] ","? "}")?
    matcher: NAME "=" ESCAPED_STRING
    NAME: /[a-zA-Z_:][a-zA-Z0-9_:]*/
    %import common.ESCAPED_STRING
    %import common.WS
    %ignore WS
"""


@dataclass(frozen=True)
class Selector:
    """A series selector: the sample ``name`` and the ``labels`` (name → value) a series must carry."""

    name: str
    labels: tuple[tuple[str, str], ...]

    def matches(self, name: str, labels: dict[str, str]) -> bool:
        """Whether a sample matches; a counter's sample also under ``name_total``, which the exposition parser
        gives a counter served without the suffix (dcgm-exporter's ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``)."""
        return (name == self.name or name == self.name + "_total") and all(labels.get(k) == v for k, v in self.labels)


@functools.cache
def _parser():
    """(the lark parser of ``_GRAMMAR``, the transformer class to a ``Selector``, lark's error
    class), built on first use: detecting a file's format imports this module, and needs no lark."""
    from lark import Lark, LarkError, Transformer

    class _ToSelector(Transformer):
        def selector(self, items):
            name, *matchers = items
            return Selector(str(name), tuple(sorted(m for m in matchers if m is not None)))

        def matcher(self, items):
            return str(items[0]), json.loads(str(items[1]))

    return Lark(_GRAMMAR, start="selector", parser="lalr"), _ToSelector, LarkError


def parse_selector(text: str, where: str = "selector") -> Selector:
    """``text`` (``name{label="value",…}``) as a ``Selector``.

    Raises:
        DumpError: not a selector (``where`` names the signal it came from, with the column of the error).
    """
    parser, to_selector, error = _parser()
    try:
        return to_selector().transform(parser.parse(text))
    except error as exc:
        col = getattr(exc, "column", None)
        at = f" at column {col}" if isinstance(col, int) and col > 0 else ""
        raise DumpError(
            f'{where}: `{text}` is not a series selector{at}; write name{{label="value",…}}, '
            'e.g. node_cpu_seconds_total{mode="idle"}'
        ) from None


@dataclass
class Scrape:
    """One scrape: ``time_s`` (seconds since the epoch), ``series`` ((name, sorted labels) → value), ``source``
    (its file, for a folder of scrapes)."""

    time_s: float
    series: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)
    source: str | None = None  # the file it was read from (a folder's scrapes), for an error's place


def _put(s: Scrape, smp, where) -> None:
    """Add one sample to a scrape; the same series twice at one time with two values is an error."""
    key = (smp.name, tuple(sorted(smp.labels.items())))
    v = float(smp.value)
    old = s.series.get(key)
    if old is not None and not (old == v or (old != old and v != v)):
        labels = ",".join(f'{a}="{b}"' for a, b in key[1])
        at = _series_lines(where, key, s.time_s)
        raise DumpError(
            f"{where}{at}: the series {key[0]}{{{labels}}} twice at time {s.time_s:.3f} s with two values ({old:g}, "
            f"{v:g}); give each series once per scrape"
        )
    s.series[key] = v


def _is_openmetrics(p: Path) -> bool:
    try:
        return _read_text(p).rstrip().endswith("# EOF")
    except DumpError:
        return False


def _families(text: str, path: str):
    """The exposition's metric families, parsed by ``prometheus_client`` (OpenMetrics when the text ends
    with ``# EOF``); a refused line is found by parsing the lines one by one and named with its number."""
    last_line = text.rsplit("\n", 1)[-1]
    if text.strip() and not text.endswith("\n") and last_line != "# EOF":  # OpenMetrics: `# EOF` may end bare
        n = text.count("\n") + 1
        last = text.rsplit("\n", 1)[-1].strip()
        raise DumpError(
            f"{path}:{n}: the file ends inside a line (`{last[:60]}` has no newline after it): it may be cut short; "
            "give the whole scrape (an exporter ends every line, the last one too, with a newline)"
        )
    openmetrics = text.rstrip().endswith("# EOF")
    if openmetrics:
        from prometheus_client.openmetrics.parser import text_string_to_metric_families
    else:
        from prometheus_client.parser import text_string_to_metric_families
    try:
        fams = list(text_string_to_metric_families(text))
        _no_sample_dropped(fams, text, path)
        return fams
    except DumpError:
        raise
    except Exception as exc:  # noqa: BLE001 - the parser raises ValueError, TypeError or IndexError on bad text
        from prometheus_client.parser import text_string_to_metric_families as one_line

        said = str(exc)
        if openmetrics and said.startswith("Clashing name: "):
            _clashing_name(text, said.removeprefix("Clashing name: "), path)
        for n, ln in enumerate(text.splitlines(), 1):
            if ln.strip() and ln.strip() in said:  # the parser quotes the line it refused
                what = (
                    "OpenMetrics allows only # HELP, # TYPE, # UNIT and # EOF comments"
                    if ln.startswith("#")
                    else "fix or drop the line"
                )
                raise DumpError(
                    f"{path}:{n}: refused by the {'OpenMetrics' if openmetrics else 'Prometheus'} text parser "
                    f"({said[:120]}); {what}"
                ) from None
        for n, ln in enumerate(text.splitlines(), 1):
            if not ln.strip() or ln.startswith("#"):
                continue
            try:
                list(one_line(ln + "\n"))
                if openmetrics:  # and as the grammar the file is in (a time stamp of 1e20 fails only there)
                    list(text_string_to_metric_families(ln + "\n# EOF\n"))
            except Exception:  # noqa: BLE001
                raise DumpError(
                    f"{path}:{n}: not a sample line of the Prometheus/OpenMetrics text format: `{ln.strip()[:80]}`"
                ) from None
        _time_stamps_are_dates(text, path, openmetrics)
        raise DumpError(
            f"{path}: not Prometheus/OpenMetrics text ({exc}); give scrapes as exporters serve them"
        ) from None


def _clashing_name(text: str, name: str, path: str) -> None:
    """After the OpenMetrics parser refused the text with "Clashing name: NAME": the line to blame. A
    ``# TYPE X_total counter`` line (Prometheus text's way; OpenMetrics names the family without ``_total``,
    and its samples ``X_total``), or the first line where family NAME comes back after another family's."""
    lines = text.splitlines()
    for n, ln in enumerate(lines, 1):
        f = ln.split()
        if len(f) == 4 and f[:2] == ["#", "TYPE"] and f[3] == "counter" and f[2].endswith("_total"):
            if name in (f[2], f[2] + "_total", f[2] + "_created"):
                family = f[2].removesuffix("_total")
                raise DumpError(
                    f"{path}:{n}: `{ln.strip()}`: in OpenMetrics text (a file that ends with `# EOF`) a counter's "
                    f"family is named without `_total`, which only its samples carry: write `# TYPE {family} "
                    "counter`; or give the file as Prometheus text: drop the `# EOF` line and write the time "
                    "stamps in milliseconds"
                )
    sfx = ("", "_total", "_created", "_count", "_sum", "_bucket", "_gcount", "_gsum", "_info")
    first, before = None, False  # the line that first named NAME; whether the line before did
    for n, ln in enumerate(lines, 1):
        f = ln.split()
        if len(f) >= 3 and f[0] == "#" and f[1] in ("TYPE", "HELP", "UNIT"):
            fam = f[2]
        elif ln.strip() and not ln.startswith("#"):
            fam = re.split(r"[{\s]", ln.strip(), maxsplit=1)[0]
        else:
            continue
        mine = any(fam + a == name or name + a == fam for a in sfx)
        if mine and first is not None and not before:
            raise DumpError(
                f"{path}:{n}: {name} comes back here after another family's lines (its family began on line {first}); "
                "OpenMetrics text keeps each family's lines together: write each family's samples, of every "
                "time stamp, in one block under its # TYPE line"
            )
        first = n if mine and first is None else first
        before = mine


def _time_stamps_are_dates(text: str, path: str, openmetrics: bool) -> None:
    """After the parser refused the text with no line to name (a time stamp of 1e20 fails inside it with
    "'float' object has no attribute 'sec'"): the first sample line whose time stamp is not a date between
    2000 and 2100 (seconds in OpenMetrics, milliseconds in Prometheus text), named with its number."""
    import math

    scale = 1.0 if openmetrics else 1e3
    for n, ln in enumerate(text.splitlines(), 1):
        if not ln.strip() or ln.startswith("#"):
            continue
        tail = ln.rsplit("}", 1)[-1].split() if "}" in ln else ln.split()[1:]
        if len(tail) < 2:
            continue
        try:
            ts = float(tail[1])
        except ValueError:
            continue
        if not (math.isfinite(ts) and EPOCH_RANGE[0] * scale <= ts <= EPOCH_RANGE[1] * scale):
            raise DumpError(
                f"{path}:{n}: the time stamp {tail[1][:30]} is not a date between 2000 and 2100 "
                f"({'seconds: OpenMetrics' if openmetrics else 'milliseconds: Prometheus text'}); fix or drop the line"
            )


def _at_time(line: str, time_s: float) -> bool:
    """Whether a sample line is of the scrape at ``time_s`` (s): its time stamp, in s (OpenMetrics) or ms
    (Prometheus text), is that time; a line without one belongs to a file of one scrape."""
    tail = line.rsplit("}", 1)[-1].split() if "}" in line else line.split()[1:]
    if len(tail) < 2:
        return True
    try:
        ts = float(tail[1])
    except ValueError:
        return True
    return any(abs(ts * k - time_s) <= 1e-3 for k in (1.0, 1e-3))  # within a millisecond


def _series_lines(where, key, time_s: float | None = None) -> str:
    """``:N (and line M)``: the lines of file ``where`` that write series ``key`` (name, labels) in the scrape
    at ``time_s``, to name them in an error; "" when ``where`` is no file or the lines are not found."""
    try:
        p = Path(str(where))
        if not p.is_file():
            return ""
        text = _read_text(p)
    except (OSError, DumpError):
        return ""
    name, labels = key
    want = [re.compile(r"[{,]\s*" + re.escape(a) + r'="' + re.escape(b) + r'"') for a, b in labels]
    hits = [
        n
        for n, ln in enumerate(text.splitlines(), 1)
        if ln.startswith(name)
        and ln[len(name) : len(name) + 1] in ("{", " ")
        and all(w.search(ln) for w in want)
        and (time_s is None or _at_time(ln, time_s))
    ]
    if len(hits) < 2:
        return ""
    return f":{hits[1]} (and line {hits[0]})"


def _no_sample_dropped(fams, text: str, path: str) -> None:
    """Refuse a series written twice for one time stamp, which the OpenMetrics parser drops without a word
    (a breaker's second `node_cpu_seconds_total{…} 103.00 T` vanished): when the families hold fewer samples
    than the text has sample lines, each line is parsed alone to name the two lines."""
    lines = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip() and not ln.startswith("#")]
    if sum(len(f.samples) for f in fams) >= len(lines):
        return
    from prometheus_client.parser import text_string_to_metric_families as one_line

    seen: dict[tuple, int] = {}
    for n, ln in lines:
        try:
            smp = [x for fam in one_line(ln + "\n") for x in fam.samples]
        except Exception:  # noqa: BLE001 - a line only the OpenMetrics grammar reads: not this check's to judge
            continue
        for x in smp:
            key = (x.name, tuple(sorted(x.labels.items())), x.timestamp)
            if key in seen:
                labels = ",".join(f'{a}="{b}"' for a, b in key[1])
                raise DumpError(
                    f"{path}:{n}: the series {x.name} is written again for the time stamp of line {seen[key]} "
                    f"(the series {x.name}{{{labels}}}, time stamp {ln.split()[-1][:30]}); the parser would keep one "
                    "of the two values without a word: give each series once per time"
                )
            seen[key] = n


def _read_text(p: Path) -> str:
    return export_text(p, "save each scrape to a file first", "a Prometheus/OpenMetrics scrape")


def _stamp(ts) -> float | None:
    if ts is None:
        return None
    if hasattr(ts, "sec"):
        return ts.sec + ts.nsec * 1e-9
    return float(ts)


_TIME_NAME = re.compile(r"^(\d+)(\.\d+)?(?![\d])")  # the scrape time at the start of a file name
_DIGITS = {10: 1.0, 13: 1e-3, 16: 1e-6, 19: 1e-9}  # seconds, ms, µs or ns since the epoch (2001–2286), by digit count
EPOCH_RANGE = (946684800.0, 4102444800.0)  # 2000-01-01 .. 2100-01-01: a scrape time outside is a unit mix-up


def _name_time(f: Path) -> float:
    m = _TIME_NAME.match(f.name)
    unit = _DIGITS.get(len(m.group(1))) if m else None
    if unit is None or (m.group(2) and unit != 1.0):
        raise DumpError(
            f"{f}: the file name holds no scrape time; name each scrape by its time since the epoch in s "
            "(`curl -s HOST:9100/metrics > DIR/$(date +%s.%N).prom`), or in whole ms, µs or ns (13, 16 or 19 digits)"
        )
    return float(m.group(1) + (m.group(2) or "")) * unit


def read_scrapes(path: str | Path, notes: list[str] | None = None) -> list[Scrape]:
    """The scrapes of ``path`` in time order (module docstring: a file of time-stamped samples, or a folder
    of one scrape per file named by its time); ``notes`` gets a folder's empty files and sub-folders.

    Raises:
        DumpError: no scrapes, a sample without a time stamp in a single file, a folder file whose name
        holds no time, two scrapes at one time, or text the exposition parser refuses (file:line).
    """
    p = Path(path)
    scrapes = _folder_scrapes(p, notes) if p.is_dir() else _file_scrapes(p)
    for a, b in zip(scrapes, scrapes[1:]):
        if b.time_s == a.time_s:
            raise DumpError(f"{p}: two scrapes at the same time {a.time_s}; each scrape needs its own time")
    if len(scrapes) < 2:
        raise DumpError(f"{p}: {len(scrapes)} scrape(s); a window needs two: scrape at least twice")
    return scrapes


def _folder_scrapes(p: Path, notes: list[str] | None) -> list[Scrape]:
    """A folder of one scrape per file, named by its time, in time order."""
    files = sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith(".") and f.suffix != ".md")
    if not files:
        raise DumpError(
            f"{p}: an empty folder; put one scrape per file in it, named by its time (`$(date +%s.%N).prom`)"
        )
    scrapes, origin, empty = [], {}, []
    for f in files:
        s = Scrape(_name_time(f), source=str(f))
        for fam in _families(_read_text(f), str(f)):
            for smp in fam.samples:
                _put(s, smp, f)
        if not s.series:
            empty.append(f.name)
        if s.time_s in origin:
            raise DumpError(
                f"{f}: the same scrape time as {origin[s.time_s]}; each scrape needs its own time (a copy left "
                "in the folder?)"
            )
        origin[s.time_s] = f.name
        scrapes.append(s)
    scrapes.sort(key=lambda s: s.time_s)
    skipped = sorted(d.name for d in p.iterdir() if d.is_dir() and not d.name.startswith("."))
    if notes is not None and empty:
        notes.append(
            f"{p}: {len(empty)} scrape file(s) hold no sample (a failed scrape?): {', '.join(empty[:5])}"
            f"{' …' if len(empty) > 5 else ''}; their windows are null (missing sample)"
        )
    if notes is not None and skipped:
        notes.append(
            f"{p}: folder(s) inside it not read ({', '.join(skipped[:5])}): one scrape per file, in the folder itself"
        )
    return scrapes


def _file_scrapes(p: Path) -> list[Scrape]:
    """A file of time-stamped samples as its scrapes, one per time stamp, in time order."""
    by_time: dict[float, Scrape] = {}
    for fam in _families(_read_text(p), str(p)):
        for smp in fam.samples:
            t = _stamp(smp.timestamp)
            if t is None:
                raise DumpError(
                    f"{p}: the sample `{smp.name}` has no time stamp; a file of many scrapes needs one per "
                    "sample (as promtool's backfill takes them), or give a folder of scrapes named by their time"
                )
            _put(by_time.setdefault(t, Scrape(t)), smp, p)
    scrapes = [by_time[t] for t in sorted(by_time)]
    if scrapes and not (EPOCH_RANGE[0] <= scrapes[0].time_s <= EPOCH_RANGE[1] and scrapes[-1].time_s <= EPOCH_RANGE[1]):
        kind = "OpenMetrics (seconds)" if _is_openmetrics(p) else "Prometheus text without `# EOF` (milliseconds)"
        raise DumpError(
            f"{p}: time stamps from {scrapes[0].time_s:.6g} s since the epoch, read as {kind}, are not a date "
            "between 2000 and 2100: the time stamps are in another unit; OpenMetrics text (ending in `# EOF`) "
            "takes seconds, Prometheus text milliseconds"
        )
    return scrapes


def catalog_of(path) -> str:
    """The shipped catalog scrapes are read against by default: ``dcgm`` when they hold DCGM fields
    (``DCGM_FI_…``, dcgm-exporter), else ``node`` (node_exporter)."""
    return "dcgm" if "DCGM_FI_" in _head(path) else "node"


def generation_of(path) -> tuple[str | None, str | None]:
    """(the shipped generation for the GPU model the scrapes name, that model) — from dcgm-exporter's
    ``modelName`` label (``NVIDIA H100 80GB HBM3`` → ``dcgm_h100``: ``capture.gpu_models``, exact SXM names);
    (None, model or None) when the model has no generation of its own (an H100 PCIe, a GH200), or the
    scrapes name none."""
    m = re.search(r'modelName="([^"]*)"', _head(path))
    if not m:
        return None, None
    from .gpu_models import part_of

    model = m.group(1)
    part = part_of(model)
    return (f"dcgm_{part}" if part else None), model


def _head(path) -> str:
    p = Path(path)
    try:
        if p.is_dir():
            files = sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith(".") and f.suffix != ".md")
            if not files:
                return ""
            p = files[0]
        if not p.is_file():  # a pipe is read once, by its reader, never by a sniff
            return ""
        with open(p, "rb") as fh:
            return fh.read(65536).decode("utf-8", "replace")
    except OSError:
        return ""


def sniff(path) -> bool:
    """Whether ``path`` looks like Prometheus/OpenMetrics text (``# TYPE``/``# HELP`` lines), or is a folder
    whose first file does."""
    head = _head(path)
    return bool(re.search(r"^# (TYPE|HELP) [a-zA-Z_:]", head[:4096], re.M))


def mapping_of(gen) -> dict[str, tuple[Selector, float, bool]]:
    """signal → (its selector, raw counts per unit of the exposition's value, whether it is a counter) for
    the signals of ``gen`` whose ``sources`` name an ``openmetrics`` series. A value in a time unit is taken
    to be in seconds (Prometheus's base unit) and converted to the signal's unit.

    Raises:
        DumpError: a selector that does not parse (naming the signal).
    """
    from .formats import raw_per_value

    out = {}
    for name, sig in gen.signals.items():
        text = dict(sig.sources).get("openmetrics")
        if text:
            sel = parse_selector(text, f"generation `{gen.name}`, signal `{name}` (sources.openmetrics)")
            out[name] = (sel, raw_per_value(gen, sig)[1], sig.kind != "gauge")
    return out


def openmetrics_capture(path: str | Path, gen, notes: list[str] | None = None) -> pa.Table:
    """``path`` (scrapes: ``read_scrapes``) as a capture of ``gen`` in the collector format, its metadata
    naming the generation.

    Raises:
        DumpError: unreadable scrapes, or a generation that names no ``openmetrics`` series.
    """
    mapping = mapping_of(gen)
    if not mapping:
        raise DumpError(
            f"{path}: generation `{gen.name}` names no series (`sources: {{openmetrics: …}}` on its signals); "
            "analyse node_exporter scrapes with a catalog that does (the shipped `node` catalog is the default)"
        )
    scrapes = read_scrapes(path, notes)
    one_model(scrapes, mapping, str(path))
    axis = axis_of(gen, sorted(mapping), str(path))
    inst = None
    if axis is not None:  # an instance axis sized by the data: the series' label of its name (`cpu`) places them
        labels = check_labels(str(path), axis[0], series_instances(scrapes, mapping, axis[0], str(path)), axis[1])
        inst = (axis[0], labels)
    t = collector_table(scrapes, mapping, label=str(path), notes=notes, instances=inst)
    return t.replace_schema_metadata({"perfonto": json.dumps({"generation": gen.name, "source": "openmetrics"})})


def openmetrics_instances_of(path: str | Path, gen) -> dict[str, tuple[str, ...]]:
    """The instance axis of ``gen`` sized by the data (``from_data``) that the signals read from series lie
    on, with the values the series' label of the axis' name takes (node_exporter's ``cpu="0"`` …), in
    instance order; empty when no such signal lies on one.

    Raises:
        DumpError: unreadable scrapes; a matched series without the label; no series for the axis.
    """
    mapping = mapping_of(gen)
    axis = axis_of(gen, sorted(mapping), str(path))
    if axis is None:
        return {}
    scrapes = read_scrapes(path)
    return {axis[0]: check_labels(str(path), axis[0], series_instances(scrapes, mapping, axis[0], str(path)), None)}


__all__ = [
    "Scrape",
    "Selector",
    "collector_table",
    "mapping_of",
    "openmetrics_capture",
    "openmetrics_instances_of",
    "parse_selector",
    "read_scrapes",
    "sniff",
    "catalog_of",
    "generation_of",
]
