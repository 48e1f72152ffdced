"""Scrapes (``openmetrics.read_scrapes``) as a table in the collector format: each signal's selector
matched against the series, the series' open labels told apart into hosts and chips, the values as
uint64 raw counts of the signal's scale. ``openmetrics`` re-exports ``collector_table``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from .dump_io import DumpError

if TYPE_CHECKING:
    from .openmetrics import Scrape, Selector

HOST_LABELS = ("instance", "Hostname")  # Prometheus's target label; dcgm-exporter's own host label
CHIP_LABELS = ("cpu", "gpu", "chip", "device", "minor_number")  # preferred, in this order, when several qualify


def _chip_number_label(keys: list[tuple], hosts: list[str], labels: list[str]) -> str | None:
    """The label that numbers the chips: one whose values are integers on every series and tell apart
    the series of a host (the other open labels — a UUID, a model name — only describe the chip), the
    preferred ones (``CHIP_LABELS``) first; None when no label does."""

    def ok(label: str) -> bool:
        vals = [dict(k).get(label, "") for k in keys]
        if not all(v.isdigit() and len(v) <= 9 for v in vals):  # a chip number, not an id that happens to be digits
            return False
        per_host: dict[tuple, set] = {}
        for h, v, k in zip(hosts, vals, keys):
            per_host.setdefault((h, v), set()).add(tuple((a, b) for a, b in k if a in labels))
        return all(len(s) == 1 for s in per_host.values())

    ordered = [x for x in CHIP_LABELS if x in labels] + [x for x in labels if x not in CHIP_LABELS]
    return next((x for x in ordered if ok(x)), None)


def _match(scrapes: list[Scrape], mapping: dict) -> tuple[dict[str, dict[tuple, dict[int, float]]], set[str]]:
    """Each signal's matched series: signal → the series' labels its selector leaves open → scrape number
    → value; and the open labels seen (``instance`` aside)."""
    found: dict[str, dict[tuple, dict[int, float]]] = {}
    open_labels: set[str] = set()
    for k, sc in enumerate(scrapes):
        for (name, labels), v in sc.series.items():
            lab = dict(labels)
            for sig, (sel, _, _) in mapping.items():
                if sel.matches(name, lab):
                    key = tuple((a, b) for a, b in labels if a not in dict(sel.labels))
                    found.setdefault(sig, {}).setdefault(key, {})[k] = v
                    open_labels.update(a for a, _ in key if a != "instance")
    return found, open_labels


def _check_matched(found: dict, mapping: dict, label: str, notes: list[str]) -> None:
    """Refuse scrapes where no selector matches; a note names the signals whose selector matches nothing."""
    missing = [s for s in mapping if s not in found]
    if not found:
        raise DumpError(
            f"{label}: no series matches a signal's `sources: {{openmetrics: …}}` selector "
            f"(e.g. {next(iter(mapping.values()))[0].name if mapping else 'none declared'}); is this the right catalog?"
        )
    if missing:
        notes.append(
            f"{label}: no series matches the selector of {', '.join(missing)} "
            "(the metrics that read them are unavailable)"
        )


def _chip_numbers(keys: list[tuple], hosts: list[str], chip_labels: list[str], label: str, notes: list[str]):
    """Each series' chip number: the value of the one integer label that tells a host's chips apart
    (``cpu="3"``, ``gpu="0"``), else the order of first appearance of its open labels (with a note)."""
    number = _chip_number_label(keys, hosts, chip_labels)
    chips = [tuple(dict(k).get(a, "") for a in chip_labels) for k in keys]
    if number is not None:
        return [int(dict(k)[number]) for k in keys]
    first: dict[tuple, int] = {}
    chip_no = [first.setdefault(c, len(first)) for c in chips]
    if chip_labels:
        notes.append(
            f"{label}: chips numbered by the labels {', '.join(chip_labels)}: "
            + "; ".join(f"{n} = {dict(zip(chip_labels, c))}" for c, n in list(first.items())[:8])
        )
    return chip_no


def _note_partial(keys: list[tuple], found: dict, S: int, label: str, notes: list[str]) -> None:
    """A note when some chips' series are absent from some scrapes (a label that changed between scrapes)."""
    partial = [k for k in keys if max(len(per.get(k, {})) for per in found.values()) < S]
    if partial:
        notes.append(
            f"{label}: {len(partial)} of {len(keys)} chips' series are absent from some scrapes (a label that "
            f"changed between scrapes splits a series in two, each null where the other is), e.g. {dict(partial[0])}"
            + _changed_label(partial)
        )


def _changed_label(partial: list[tuple]) -> str:
    """ "; the label that changed: …" for two of ``partial`` that differ in one label's value only, else ""."""
    for i, a in enumerate(partial):
        da = dict(a)
        for b in partial[i + 1 :]:
            db = dict(b)
            diff = [n for n in da.keys() | db.keys() if da.get(n) != db.get(n)]
            if len(diff) == 1:
                n = diff[0]
                return f"; the label that changed: {n} ({da.get(n)!r} and {db.get(n)!r})"
    return ""


def _key_columns(scrapes: list[Scrape], hosts: list[str], chip_no: list[int]) -> dict[str, pa.Array]:
    """The key columns: ``host`` (left out when no series names one), ``chip``, ``sample`` (the scrape's
    number) and ``timestamp_ns`` (from the first scrape)."""
    S, C = len(scrapes), len(hosts)
    t0 = scrapes[0].time_s
    cols: dict[str, pa.Array] = {
        "host": pa.array(np.tile(np.array(hosts, dtype=object), S).tolist(), pa.string()),
        "chip": pa.array(np.tile(np.array(chip_no, np.int64), S)),
        "sample": pa.array(np.repeat(np.arange(S, dtype=np.int64), C)),
        "timestamp_ns": pa.array(
            np.repeat(np.rint((np.array([s.time_s for s in scrapes]) - t0) * 1e9).astype(np.int64), C)
        ),
    }
    if not any(hosts):
        del cols["host"]
    return cols


def _signal_column(
    sig: str, per_key: dict, keys: list[tuple], S: int, per: float, label: str, names: list[str] | None = None
) -> pa.Array:
    """One signal's column: its values as uint64 raw counts of the signal's scale, null where the series
    is absent or NaN; a value outside an unsigned 64-bit register is refused."""
    vals = np.full((S, len(keys)), np.nan)
    for c, key in enumerate(keys):
        for k, v in per_key.get(key, {}).items():
            vals[k, c] = v
    raw, null = _raw(vals, sig, per, label, names)
    return pa.array(raw.reshape(-1).astype(np.uint64), mask=null.reshape(-1))


def _raw(
    vals: np.ndarray, sig: str, per: float, label: str, names: list[str] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Values (NaN: absent) as raw counts of the signal's scale, rounded, and their nulls; a value outside
    an unsigned 64-bit register is refused."""
    null = ~np.isfinite(vals)
    raw = np.rint(
        np.where(null, 0.0, vals) * per
    )  # raw counts of the signal's scale (gauges too: registers are integers)
    if np.any(raw < 0) or np.any(raw >= 2.0**64):
        k, c = np.argwhere(~null & ((raw < 0) | (raw >= 2.0**64)))[0]
        bad = float(vals[k, c])
        where = names[k] if names is not None and k < len(names) else label  # the scrape's file, or its time
        raise DumpError(
            f"{where}: the series of `{sig}` holds {bad:g}, outside an unsigned 64-bit register at the signal's "
            f"scale; a negative value needs an offset the catalog declares, a huge one a larger scale"
        )
    return raw, null


def series_instances(scrapes: list[Scrape], mapping: dict, axis: str, label: str) -> tuple[str, ...]:
    """The values of label ``axis`` (an instance axis sized by the data: node_exporter's ``cpu``) on the
    series the signals' selectors match, in instance order (``capture.instances.ordered_labels``).

    Raises:
        DumpError: a matched series without the label (naming the capture and the series' labels).
    """
    from .instances import ordered_labels

    found, _ = _match(scrapes, mapping)
    out = []
    for sig, per in found.items():
        for key in per:
            if axis not in dict(key):
                raise DumpError(
                    f"{label}: a series of `{sig}` has no `{axis}` label ({dict(key) or 'no open label'}); the "
                    f"signal lies on the instance axis `{axis}`, whose instances are that label's values"
                )
            out.append(dict(key)[axis])
    return ordered_labels(out)


def _instance_columns(
    cols, found, mapping, keys, axis, labels, S, label: str, notes: list[str], names: list[str] | None = None
) -> None:
    """Each signal's (rows × instances) values as flat ``name[i]`` columns: row (scrape, chip key), instance
    the position of the series' ``axis`` label among ``labels``. A note names the chips (hosts) that have no
    series at all for some instances: the capture's hosts share one axis, so those hosts' windows are null."""
    from .instances import flat_columns

    pos = {x: i for i, x in enumerate(labels)}
    where = {k: c for c, k in enumerate(keys)}
    seen = np.zeros((len(keys), len(labels)), bool)
    for sig, per_key in found.items():
        vals = np.full((S, len(keys), len(labels)), np.nan)
        for key, per_scrape in per_key.items():
            lab = dict(key)
            c = where[tuple((a, b) for a, b in key if a != axis)]
            seen[c, pos[lab[axis]]] = True
            for k, v in per_scrape.items():
                vals[k, c, pos[lab[axis]]] = v
        raw, null = _raw(vals, sig, mapping[sig][1], label, names)
        flat_columns(cols, sig, raw.reshape(S * len(keys), -1), null.reshape(S * len(keys), -1))
    for c in np.flatnonzero(~seen.all(axis=1))[:4]:
        lacking = [labels[i] for i in np.flatnonzero(~seen[c])]
        notes.append(
            f"{label}: {dict(keys[c]) or 'the chip'} has no series for {axis} {', '.join(lacking[:8])} in any scrape, "
            f"which other hosts have: its windows are null (one `{axis}` axis for the capture); analyse hosts with "
            "other instances apart"
        )


def collector_table(
    scrapes: list[Scrape],
    mapping: dict[str, tuple[Selector, float, bool]],
    *,
    label: str,
    notes: list[str] | None = None,
    instances: tuple[str, tuple[str, ...]] | None = None,
) -> pa.Table:
    """The scrapes in the collector format: one row per (host, chip) and scrape (``sample``: the scrape's
    number, ``timestamp_ns`` from the first scrape), one column per signal whose selector matched: a
    counter's running total or a gauge's level, as uint64 raw counts of the signal's scale; null where the
    series is absent or NaN. ``instances``: ``(axis, labels)``, an instance axis sized by the data: the
    series' ``axis`` label (``cpu``) is then the instance, placed at its position among ``labels``, and the
    other open labels the chip (one per host for node_exporter); the columns are ``name[i]``.

    Raises:
        DumpError: no selector matches any series (``label`` names the capture); a value that is negative
        or too large for a 64-bit register at the signal's scale.
    """
    notes = notes if notes is not None else []
    found, open_labels = _match(scrapes, mapping)
    _check_matched(found, mapping, label, notes)
    axis = instances[0] if instances else None
    keys = list(dict.fromkeys(tuple((a, b) for a, b in key if a != axis) for per in found.values() for key in per))
    open_labels.discard(axis or "")
    host_label = next((h for h in HOST_LABELS if any(h in dict(k) for k in keys)), None)
    hosts = [dict(k).get(host_label, "") if host_label else "" for k in keys]
    chip_no = _chip_numbers(keys, hosts, sorted(open_labels - {host_label}), label, notes)
    S = len(scrapes)
    if instances is None:  # (per instance, a series absent from a scrape is null there, as any register)
        _note_partial(keys, found, S, label, notes)
    cols = _key_columns(scrapes, hosts, chip_no)
    names = [s.source or f"{label} (the scrape at {s.time_s:.9g} s)" for s in scrapes]  # for an error's place
    if instances is not None:
        _instance_columns(cols, found, mapping, keys, instances[0], instances[1], S, label, notes, names)
        return pa.table(cols)
    for sig, per_key in found.items():
        _, per, _counter = mapping[sig]
        cols[sig] = _signal_column(sig, per_key, keys, S, per, label, names)
    return pa.table(cols)


__all__ = ["CHIP_LABELS", "HOST_LABELS", "collector_table", "series_instances"]
